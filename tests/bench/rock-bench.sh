#!/usr/bin/env bash
# rock-bench.sh: throughput both ways, round-trip latency and connect time through one rockd on loopback, rock clients vs plain TCP client and raw TCP; prints a table, never a verdict.
#
# Usage: rock-bench.sh [ROUNDS]          (ROUNDS defaults to 5)
#
# Environment:
#   BUILDDIR          top build directory (default: two levels above this
#                     script); uses $BUILDDIR/tests/bench/rock-bench and
#                     $BUILDDIR/daemon/rockd
#   ROCK_BENCH        path of the rock-bench binary (overrides BUILDDIR)
#   ROCK_WRAPPER      path of the rock wrapper (default $BUILDDIR/tools/rock)
#   ROCKD             path of rockd (overrides BUILDDIR)
#   ROCK_BENCH_EXTRA  1: one more column, "plain-nd", a plain client with
#                     TCP_NODELAY (as the engine sets on its data
#                     connection)
#
# Client kinds: "plain", an ordinary TCP client through rockd's plain relay;
# "under-rock", the very same client program run under the rock wrapper
# (librock.so makes its socket a rock: issue 4's transparent client); and
# "engine", a client built on the engine's own API (rockcat's way); and
# "raw", the plain client straight to the backend, without rockd: every
# ratio column divides by it (x/raw) or by plain through rockd (x/plain).
# Upload: the client writes to a sink backend (reads to EOF, closes);
# download: a source backend writes to the client; latency: an echo backend.
# One rockd fronts all three; all on 127.0.0.1 with free ports. Every figure is the
# median of ROUNDS runs; each round runs every client kind back to back, the
# order alternating between rounds, after one discarded warm-up run per kind.
# Both rock and plain go through rockd (plain through its plain relay).
# Runs are sized for about 0.2-1 s each; the whole script takes 1-2 minutes.
# Exit status 0 unless something failed to run.

set -u

me=rock-bench.sh

# die, tmp, pids, bench_setup, start_backend, median and the exit trap
# shellcheck source=bench-lib.sh
. "$(dirname -- "$0")/bench-lib.sh"

bench_setup "$@"
rockd=${ROCKD:-$builddir/daemon/rockd}
[ -x "$rockd" ] || die "$rockd not built (set BUILDDIR/ROCKD)"

kinds=(raw plain under-rock engine)
if [ "${ROCK_BENCH_EXTRA:-0}" = 1 ]; then
	kinds+=(plain-nd)
fi

# Block sizes and bytes per throughput run (smaller runs for small blocks:
# each write is a system call); round trips per latency run, cut off by the
# program after 1 s; connections per connect run.
blocks=(64 256 1024 4096 16384 65536)
declare -A total=([64]=8000000 [256]=24000000 [1024]=64000000
	[4096]=160000000 [16384]=256000000 [65536]=256000000)
trips=1000
conns=300



freeport() {
	"$bench" freeport | awk '$1 == "port" { print $2 }'
}

start_backend sink
sink_port=$backend_port
start_backend echo
echo_port=$backend_port
start_backend source
source_port=$backend_port

# rockd on two free ports; a port taken meanwhile makes it exit: try again.
rockd_pid=
for attempt in 1 2 3; do
	sink_front=$(freeport)
	echo_front=$(freeport)
	source_front=$(freeport)
	if [ -z "$sink_front" ] || [ -z "$echo_front" ] || [ -z "$source_front" ]; then
		die "no free port"
	fi
	"$rockd" -F --listen "127.0.0.1:$sink_front" --backend "127.0.0.1:$sink_port" \
		--listen "127.0.0.1:$echo_front" --backend "127.0.0.1:$echo_port" \
		--listen "127.0.0.1:$source_front" --backend "127.0.0.1:$source_port" \
		2>>"$tmp/rockd.log" &
	rockd_pid=$!
	up=0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$rockd_pid" 2>/dev/null || break
		if "$bench" connect plain 127.0.0.1 "$sink_front" 1 >/dev/null 2>&1 &&
			"$bench" connect plain 127.0.0.1 "$echo_front" 1 >/dev/null 2>&1 &&
			"$bench" connect plain 127.0.0.1 "$source_front" 1 >/dev/null 2>&1; then
			up=1
			break
		fi
		sleep 0.05
	done
	if [ "$up" = 1 ]; then
		pids+=("$rockd_pid")
		break
	fi
	kill "$rockd_pid" 2>/dev/null
	wait "$rockd_pid" 2>/dev/null
	rockd_pid=
	echo "$me: rockd did not come up (attempt $attempt)" >&2
done
[ -n "$rockd_pid" ] || die "rockd did not start: $(tail -n 3 "$tmp/rockd.log")"

# run_one KIND MEASURE ARGS...: prints the figure (the last field) and the
# count before it (round trips done, for latency)
# MEASURE is throughput (upload), download or latency (ARGS: BLOCK COUNT)
# or connect (ARGS: N).
run_one() {
	local kind=$1 what=$2 mode port raw_port out
	local -a pre=()
	shift 2
	mode=$kind
	case $what in
	latency) port=$echo_front raw_port=$echo_port ;;
	download) port=$source_front raw_port=$source_port ;;
	*) port=$sink_front raw_port=$sink_port ;;
	esac
	case $kind in
	engine) mode=rock ;;
	under-rock) mode=plain pre=("$wrapper") ;;
	connect-first)
		# A fresh process per connection: the probe and the engine's
		# start are in every one of them (no shared probe cache).
		mode=plain pre=(env ROCK_PROBE_CACHE= "$wrapper")
		;;
	connect-shared)
		# The same, finding rockd in the probe cache the user's
		# processes share: the engine's start, no probe.
		mode=plain pre=("$wrapper")
		;;
	plain-first) mode=plain ;;
	plain-nd) mode=plain-nodelay ;;
	raw) mode=plain port=$raw_port ;;
	*) ;;
	esac
	if ! out=$("${pre[@]}" "$bench" "$what" "$mode" 127.0.0.1 "$port" "$@" 2>"$tmp/run.err"); then
		die "'rock-bench $what $mode 127.0.0.1 $port $*' failed: $(cat "$tmp/run.err")"
	fi
	[ -s "$tmp/run.err" ] && sed "s/^/  ($kind $what $*) /" "$tmp/run.err" >&2
	out=$(printf '%s\n' "$out" |
		awk -v w="$what" '$1 == w && $NF ~ /^[0-9]+(\.[0-9]+)?$/ { print $NF, $(NF - 1) }')
	[ -n "$out" ] || die "unexpected output from 'rock-bench $what $mode'"
	echo "$out"
}

declare -A result	# "NAME/KIND" -> median, NAME as given to measure
short=()		# latency rows cut off by the time budget

# measure NAME WHAT ARGS...: all kinds, warm-up then ROUNDS rounds
measure() {
	local name=$1 what=$2 kind r v n line order
	shift 2
	declare -A vals=()
	local -a ks=("${kinds[@]}")
	if [ "$what" = connect ]; then
		ks=()
		for kind in "${kinds[@]}"; do
			[ "$kind" = plain-nd ] || ks+=("$kind")
		done
	fi
	for kind in "${ks[@]}"; do
		run_one "$kind" "$what" "$@" >/dev/null
	done
	for ((r = 1; r <= rounds; r++)); do
		order=("${ks[@]}")
		if ((r % 2 == 0)); then
			order=()
			for ((v = ${#ks[@]} - 1; v >= 0; v--)); do
				order+=("${ks[v]}")
			done
		fi
		line=
		for kind in "${order[@]}"; do
			v=$(run_one "$kind" "$what" "$@") || exit 1
			n=${v#* }
			v=${v%% *}
			vals[$kind]="${vals[$kind]:-} $v"
			if [ "$what" = latency ] && [ "$n" -lt "$trips" ]; then
				short+=("$name $kind")
			fi
			line="$line $kind $v"
		done
		printf '%-22s round %d/%d:%s\n' "$name" "$r" "$rounds" "$line"
	done
	for kind in "${ks[@]}"; do
		# shellcheck disable=SC2086 # the list is space-separated numbers
		result["$name/$kind"]=$(median ${vals[$kind]})
	done
}

echo "$me: rockd pid $rockd_pid on 127.0.0.1:$sink_front (sink :$sink_port)," \
	"127.0.0.1:$echo_front (echo :$echo_port) and 127.0.0.1:$source_front" \
	"(source :$source_port); $rounds rounds"
t_start=$SECONDS
for b in "${blocks[@]}"; do
	measure "throughput $b" throughput "$b" "${total[$b]}"
done
for b in "${blocks[@]}"; do
	measure "download $b" download "$b" "${total[$b]}"
done
for b in "${blocks[@]}"; do
	measure "latency $b" latency "$b" "$trips"
done
measure connect connect "$conns"
# First connections, each in a new process: under rock, probe (cache miss)
# and engine start included; medians of 15 such processes per round.
first_conn() {
	local kind=$1 i v times=()
	for ((i = 0; i < 15; i++)); do
		v=$(run_one "$kind" connect 1) || exit 1
		times+=("${v%% *}")
	done
	median "${times[@]}"
}
fvals_rock=() fvals_plain=() fvals_shared=()
for ((r = 1; r <= rounds; r++)); do
	fvals_rock+=("$(first_conn connect-first)")
	fvals_shared+=("$(first_conn connect-shared)")
	fvals_plain+=("$(first_conn plain-first)")
	printf '%-22s round %d/%d: under-rock %s (shared cache %s) plain %s\n' "first connect" "$r" "$rounds" \
		"${fvals_rock[-1]}" "${fvals_shared[-1]}" "${fvals_plain[-1]}"
done
result["first/under-rock"]=$(median "${fvals_rock[@]}")
result["first/plain"]=$(median "${fvals_plain[@]}")
result["shared/under-rock"]=$(median "${fvals_shared[@]}")
result["shared/plain"]=${result["first/plain"]}
rockd_fds=$(find "/proc/$rockd_pid/fd" -mindepth 1 2>/dev/null | wc -l)

# ---- the table
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3g", b / a; else printf "-" }'
}

# Ratios are figure over figure: above 1 is more throughput, or a longer
# time, than the reference.
ratios=(plain/raw under-rock/raw engine/raw under-rock/plain engine/plain)
row() {
	local name=$1 label=$2 kind q
	printf '%-20s' "$label"
	for kind in "${kinds[@]}"; do
		printf ' %10s' "${result["$name/$kind"]:--}"
	done
	for q in "${ratios[@]}"; do
		printf ' %10s' "$(ratio "${result["$name/${q#*/}"]:-0}" "${result["$name/${q%/*}"]:-0}")"
	done
	printf '\n'
}

header() {
	local kind q
	printf '%-20s' "$1"
	for kind in "${kinds[@]}"; do
		printf ' %10s' "$kind"
	done
	for q in "${ratios[@]}"; do
		printf ' %10s' "${q/under-rock/under}"
	done
	printf '\n'
}

echo
echo "medians of $rounds rounds; every client but raw through rockd on loopback"
header "upload MB/s"
for b in "${blocks[@]}"; do
	row "throughput $b" "  $b B blocks"
done
echo
header "download MB/s"
for b in "${blocks[@]}"; do
	row "download $b" "  $b B blocks"
done
echo
header "round trip us"
for b in "${blocks[@]}"; do
	row "latency $b" "  $b B"
done
echo
header "connect us"
row connect "  $conns in one process (cache hit)"
row first "  first in a process (probe)"
row shared "  first, shared probe cache"
echo "  paper: rock 3908 us vs raw 221 us = 17.7x"
echo
echo "bytes per upload or download run: $(for b in "${blocks[@]}"; do printf '%s B: %s\n' "$b" "${total[$b]}"; done | paste -sd, - | sed 's/,/, /g')"
echo "latency: up to $trips round trips per run, at most 1 s of them;" \
	"connect: $conns connections per run, opening timed"
if [ "${#short[@]}" -gt 0 ]; then
	printf 'cut off by the 1 s budget (each round trip took long): %s\n' \
		"$(printf '%s\n' "${short[@]}" | sort -u | paste -sd, -)"
fi
for b in "${blocks[@]}"; do
	if awk -v v="${result["latency $b/plain"]}" 'BEGIN { exit !(v >= 30000) }'; then
		echo "note: plain round trips of ~40 ms and more are a Nagle/delayed-ACK" \
			"stall in rockd's plain relay (its sockets have no TCP_NODELAY)"
		break
	fi
done
echo "rockd open descriptors after the runs: $rockd_fds; total time $((SECONDS - t_start)) s"
exit 0
