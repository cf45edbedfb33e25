#!/usr/bin/env bash
# path-bench.sh: on real path profiles, through one rockd: bulk throughput both ways, connect time in round trips, first byte after a restore; the same client plain and under rock in one run; prints ratios, never a verdict.
#
# Usage (as root, from the build tree): tests/bench/path-bench.sh [ROUNDS]
#   ROUNDS     throughput rounds per profile (default 5); each round runs
#              plain and rock one after the other, alternating which goes
#              first, so each has the path to itself
#   PROFILES   path profiles (default "wan cellular"; tests/netns/profiles.sh)
#   SEED       nfq-netem's random draws (default: random; printed)
#   AA         1: the "rock" column runs plain too (an A/A control: what
#              the path alone does to a ratio)
#   MIB        size of each bulk transfer (default 64 MiB; cellular 4,
#              satellite and dsl 16)
#   CC         TCP congestion control in the namespaces (default: the
#              system's); printed, since on a lossy path it decides most
#              of a transfer's rate (see doc/paths.md)
#
# Both clients are tests/traffic (sink for downloads, push for uploads,
# connect for connect times), plain TCP through rockd's plain relay, and
# under the rock wrapper (a rock through rockd): the same program making
# the same system calls. Figures are medians; ratios are rock/plain, the
# median of each round's ratio. The server namespace allows TCP Fast Open
# (net.ipv4.tcp_fastopen=3), as rockd(8) recommends.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$(cd "$here/../.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
export top_builddir top_srcdir
# shellcheck source=../netns/rock-lib.sh
. "$top_srcdir/tests/netns/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
rounds=${1:-5}
# SEED: the first round's draws (rounds use SEED+1, SEED+2, ...).
seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
case $rounds in '' | *[!0-9]* | 0*) echo "usage: $0 [ROUNDS]" >&2; exit 2 ;; esac
[ -x "$TRAFFIC" ] && [ -x "$ROCKD" ] || { echo "build first: make && make tests/traffic" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

# KIND CMD...: CMD plain, or under rock (KIND rock), in the client namespace.
client() {
	local kind=$1
	shift
	if [ "$kind" = rock ] && [ "${AA:-0}" != 1 ]; then
		ROCK_LOG="$t_tmp/rock.log" t_foreign nn_c "$ROCK" "$@"
	else
		nn_c "$@"
	fi
}

# Download: BYTES from the server; MB/s at the client, first byte to the end.
down_mbs() {
	client "$1" "$TRAFFIC" sink "$NN_S_ADDR" 7000 /dev/null |
		awk '$1 == "bytes" { printf "%.4f", $2 / $4 / 1e6 }'
}
# Upload: BYTES to the server; MB/s from connected to the server's end.
up_mbs() {
	client "$1" "$TRAFFIC" push "$NN_S_ADDR" 7001 "$bytes" |
		awk -v n="$bytes" '$1 == "seconds" { printf "%.4f", n / $2 / 1e6 }'
}

# FN ROUND: FN plain and FN rock one after the other, plain first in odd
# rounds; their MB/s in $t_tmp/plain.mbs and $t_tmp/rock.mbs. Run at the
# same time they competed, and the one whose data started first (plain:
# a rock's handshake costs a round trip or more) took the larger share.
# With nfq-netem both start from the round's seed: their TCP packets meet
# the same losses, delays and reorderings, packet for packet (a rock's
# heartbeats draw from a stream of their own), so the ratio is theirs and
# not the path's luck, which on cellular varies a transfer's rate by a
# factor of three from one run to the next.
both() {
	local order="plain rock" k
	[ $(($2 % 2)) -eq 1 ] || order="rock plain"
	for k in $order; do
		[ "$paired" = 0 ] || nn_netem_reseed $((seed + $2)) || return 1
		"$1" "$k" >"$t_tmp/$k.mbs"
	done
}

bench_profile() {
	local p=$1 rtt r k ratios_d=() ratios_u=() d_plain=() d_rock=() u_plain=() u_rock=()
	export NN_PROFILE=$p
	# The last profile's cleanup took the scratch directory with it.
	mkdir -p "$t_tmp"
	rtt=$(nn_profile_rtt_ms "$p")
	case $(nn_profile_base "$p") in
	cellular) bytes=$((4 * 1048576)) ;;
	satellite | dsl) bytes=$((16 * 1048576)) ;;
	*) bytes=$((64 * 1048576)) ;;
	esac
	[ -z "${MIB:-}" ] || bytes=$((MIB * 1048576))
	rock_netns_up
	nn_s sysctl -qw net.ipv4.tcp_fastopen=3
	if [ -n "${CC:-}" ]; then
		nn_s sysctl -qw net.ipv4.tcp_congestion_control="$CC" &&
			nn_c sysctl -qw net.ipv4.tcp_congestion_control="$CC" || return 1
	fi
	nn_s socat -t 60 TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork SYSTEM:"'$TRAFFIC' pattern $bytes" 2>/dev/null &
	pids+=($!)
	nn_s socat -u -t 60 TCP4-LISTEN:9001,bind=127.0.0.1,reuseaddr,fork OPEN:/dev/null 2>/dev/null &
	pids+=($!)
	nn_s socat -t 60 TCP4-LISTEN:9002,bind=127.0.0.1,reuseaddr,fork EXEC:cat 2>/dev/null &
	pids+=($!)
	for k in 3 4; do
		nn_s "$TRAFFIC" source 900$k 20000 600 /dev/null 2>/dev/null &
		pids+=($!)
	done
	nn_s "$ROCKD" -F --listen 7000 --backend 127.0.0.1:9000 --listen 7001 --backend 127.0.0.1:9001 \
		--listen 7002 --backend 127.0.0.1:9002 --listen 7003 --backend 127.0.0.1:9003 \
		--listen 7004 --backend 127.0.0.1:9004 2>"$t_tmp/rockd.log" &
	pids+=($!)
	for k in 9000 9001 9002 9003 9004; do nn_wait_port "$NN_S" 127.0.0.1 "$k" 5 || return 1; done
	nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 5 || return 1
	paired=0
	if [ -n "$(nn_profile_netem "$(nn_profile_base "$p")")" ] && ! nn_has_netem; then
		paired=1
	fi
	echo "== $p: round trip $rtt ms; netem each way: $(nn_profile_netem "$(nn_profile_base "$p")"); TCP congestion control $(nn_s sysctl -n net.ipv4.tcp_congestion_control)"
	if [ "$paired" = 1 ]; then
		echo "   paired rounds: plain and rock each start from the round's seed (nfq-netem; seeds $((seed + 1))..$((seed + rounds)))"
	else
		echo "   unpaired rounds: each transfer meets its own random draws"
	fi

	# Bulk, both ways: plain and rock back to back, so that both see much
	# the same weather (a lossy path makes each transfer's rate vary by a
	# factor of two or three from one to the next); each round's ratio is
	# theirs.
	for ((r = 1; r <= rounds; r++)); do
		both down_mbs "$r"
		d_plain+=("$(cat "$t_tmp/plain.mbs")") d_rock+=("$(cat "$t_tmp/rock.mbs")")
		both up_mbs "$r"
		u_plain+=("$(cat "$t_tmp/plain.mbs")") u_rock+=("$(cat "$t_tmp/rock.mbs")")
		ratios_d+=("$(ratio "${d_rock[-1]}" "${d_plain[-1]}")")
		ratios_u+=("$(ratio "${u_rock[-1]}" "${u_plain[-1]}")")
		echo "   round $r: download plain ${d_plain[-1]} rock ${d_rock[-1]} MB/s; upload plain ${u_plain[-1]} rock ${u_rock[-1]} MB/s"
	done
	printf '   %-9s plain %8s MB/s  rock %8s MB/s  rock/plain %s (%d rounds of %d MiB)\n' \
		download "$(median "${d_plain[@]}")" "$(median "${d_rock[@]}")" "$(median "${ratios_d[@]}")" "$rounds" $((bytes / 1048576))
	printf '   %-9s plain %8s MB/s  rock %8s MB/s  rock/plain %s\n' \
		upload "$(median "${u_plain[@]}")" "$(median "${u_rock[@]}")" "$(median "${ratios_u[@]}")"

	# Connect: plain; rock with the probe cache hit (the process's second
	# connect on); rock in a fresh process, the shared probe cache hit
	# (ROCK_PROBE_CACHE); rock with a miss (a fresh process, no shared cache).
	local c_plain c_hit c_shared=() c_miss=() ms
	c_plain=$(client plain "$TRAFFIC" connect "$NN_S_ADDR" 7002 11 | awk '{ print $2 / 1000 }')
	c_hit=$(client rock "$TRAFFIC" connect "$NN_S_ADDR" 7002 11 | awk 'NR > 1 { print $2 / 1000 }')
	for ((k = 0; k < 5; k++)); do
		c_shared+=("$(client rock "$TRAFFIC" connect "$NN_S_ADDR" 7002 1 | awk '{ print $2 / 1000 }')")
		c_miss+=("$(ROCK_PROBE_CACHE='' client rock "$TRAFFIC" connect "$NN_S_ADDR" 7002 1 | awk '{ print $2 / 1000 }')")
	done
	local rt=$rtt
	[ "$rt" -gt 0 ] || rt=1
	for k in "plain:$(median $c_plain)" "rock, probe cache hit:$(median $c_hit)" \
		"rock, shared cache hit:$(median "${c_shared[@]}")" "rock, probe cache miss:$(median "${c_miss[@]}")"; do
		ms=${k##*:}
		printf '   connect   %-24s %8.1f ms = %4.1f RTT\n' "${k%:*}" "$ms" "$(awk -v m="$ms" -v r="$rt" 'BEGIN { print m / r }')"
	done

	# First byte after a restore: a paced stream each, plain and rock, three
	# 8 s blackholes.
	local fb_plain=() fb_rock=() restore
	client plain "$TRAFFIC" sink "$NN_S_ADDR" 7003 /dev/null >"$t_tmp/plain.sink" 2>&1 &
	pids+=($!)
	client rock "$TRAFFIC" sink "$NN_S_ADDR" 7004 /dev/null >"$t_tmp/rock.sink" 2>&1 &
	pids+=($!)
	nap 3
	for ((k = 0; k < 3; k++)); do
		nn_blackhole both
		nap 8
		nn_restore
		restore=$NN_V4_MS
		nap $((6 + rtt / 100))
		for r in plain rock; do
			ms=$(awk -v t="$restore" '$1 == "gap" && $2 <= t && $3 > t { print $3 - t; exit }' "$t_tmp/$r.sink")
			if [ "$r" = plain ]; then fb_plain+=("${ms:-none}"); else fb_rock+=("${ms:-none}"); fi
		done
	done
	printf '   first byte after an 8 s blackhole: plain %s ms, rock %s ms (median of %s / %s)\n' \
		"$(median "${fb_plain[@]}")" "$(median "${fb_rock[@]}")" "${fb_plain[*]}" "${fb_rock[*]}"
	stop_pids
	nn_cleanup
}

nn_require_root
for p in ${PROFILES:-wan cellular}; do
	NN_ID=rkb$$$p
	NN_ID=${NN_ID//[^a-z0-9]/}
	bench_profile "$p" || echo "   $p: could not set up"
done
