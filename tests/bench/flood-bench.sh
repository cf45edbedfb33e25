#!/usr/bin/env bash
# flood-bench.sh: what a stranger's flood of forged reconnects costs a legitimate rock beside it: echo latency and first echo, quiet and under the flood, with rockd's CPU per forged request; prints figures and ratios, never a verdict.
#
# Usage: flood-bench.sh [ROUNDS]   (default 3; loopback, any user, a minute)
#
# One rockd fronts rock-bench's echo backend. Each round, quiet then flooded:
#   latency us    a rock's 64-byte round trips for 1 s (rock-bench latency
#                 rock: the engine in process), the median
#   first echo us 100 connections under tools/rock, each from socket() to
#                 its first 64-byte echo (rock-bench first), the median:
#                 resumed handshakes, as a client's repeat connects are
#   flooded:      the same while rock-bench forge sends floods of 10,000
#                 reconnect requests for sessions that do not exist (random
#                 ids and tags), 50 at a time, back to back for as long as
#                 the measuring lasts
# Then rockd's CPU (user + system, /proc ticks) per forged request, the
# refusals answered (signed, within rockd's budget of 1,000 a second) and
# those reset unanswered.
#
# Environment: BUILDDIR, ROCK_BENCH, ROCK_WRAPPER (bench-lib.sh).

set -u
me=flood-bench.sh
# shellcheck source=bench-lib.sh
. "$(dirname -- "$0")/bench-lib.sh"
bench_setup "${1:-3}"
rockd=$builddir/daemon/rockd
[ -x "$rockd" ] || die "$rockd not built"

start_backend echo echo
echo_port=$backend_port
port=$("$bench" freeport | awk '{ print $2 }')
start_rockd "$port" "$echo_port"
# The client's files: its own, so the first connect is a first contact.
export ROCK_KNOWN_SERVERS=$tmp/known ROCK_PROBE_CACHE=$tmp/probes
chmod 700 "$tmp"
hz=$(getconf CLK_TCK)

# measure: "LATENCY_US FIRST_US" of a legitimate rock now
measure() {
	local lat fst
	lat=$("$bench" latency rock 127.0.0.1 "$port" 64 100000 2>>"$tmp/client.err" |
		awk '{ print $5 }') || die "latency failed: $(tail -n 2 "$tmp/client.err")"
	fst=$("$wrapper" "$bench" first 127.0.0.1 "$port" 100 2>>"$tmp/client.err" |
		awk '{ print $3 }') || die "first failed: $(tail -n 2 "$tmp/client.err")"
	echo "$lat $fst"
}

q_lat=() q_fst=() f_lat=() f_fst=() cpu=() answered=() unanswered=()
for ((r = 1; r <= rounds; r++)); do
	read -r l f <<<"$(measure)"
	q_lat+=("$l") q_fst+=("$f")
	t0=$(ticks "$rockd_pid")
	: >"$tmp/forge.out"
	# Floods of 10,000 back to back, for as long as the measuring lasts.
	(while :; do
		"$bench" forge 127.0.0.1 "$port" 10000 50 >>"$tmp/forge.out" 2>>"$tmp/client.err" || exit 1
	done) &
	forge_pid=$!
	read -r l f <<<"$(measure)"
	f_lat+=("$l") f_fst+=("$f")
	kill "$forge_pid" 2>/dev/null
	wait "$forge_pid" 2>/dev/null
	t1=$(ticks "$rockd_pid")
	read -r n a u s <<<"$(awk '$1 == "forge" { n += $2; a += $3; u += $4; s += $5 }
		END { printf "%d %d %d %.2f\n", n, a, u, s }' "$tmp/forge.out")"
	[ "$n" -gt 0 ] || die "no flood was sent: $(tail -n 2 "$tmp/client.err")"
	cpu+=("$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')")
	answered+=("$((a * 10000 / n))") unanswered+=("$((u * 10000 / n))")
	echo "round $r/$rounds: latency ${q_lat[-1]} -> $l us, first echo ${q_fst[-1]} -> $f us;" \
		"forge: $n sent in floods of 10000, $a answered, $u reset unanswered, $s s; rockd ${cpu[-1]} us CPU each (with the legitimate traffic)"
done
ql=$(median "${q_lat[@]}") fl=$(median "${f_lat[@]}")
qf=$(median "${q_fst[@]}") ff=$(median "${f_fst[@]}")
echo "$me: loopback, medians of $rounds rounds"
printf '%-28s %10s %10s %8s\n' "" quiet flooded ratio
printf '%-28s %10s %10s %8s\n' "rock echo latency us" "$ql" "$fl" \
	"$(awk -v a="$fl" -v b="$ql" 'BEGIN { printf "%.2f", a / b }')"
printf '%-28s %10s %10s %8s\n' "rock first echo us" "$qf" "$ff" \
	"$(awk -v a="$ff" -v b="$qf" 'BEGIN { printf "%.2f", a / b }')"
echo "rockd CPU per forged request (legitimate traffic included): $(median "${cpu[@]}") us;" \
	"per 10000 sent: answered $(median "${answered[@]}"), reset unanswered $(median "${unanswered[@]}")"
