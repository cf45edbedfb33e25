#!/usr/bin/env bash
# write-bench.sh: small writes under the shim: upload per block size (raw TCP, plain through rockd, a rock under tools/rock through rockd, one run) and an epoll client's CPU split with many rocks.
#
# Usage: write-bench.sh [ROUNDS] [CONNS]   (ROUNDS default 5, CONNS default 2000)
#
# Upload: rock-bench's throughput client (blocking write() of BLOCK bytes,
# then a half-close, timed to the sink's close) run three ways back to back
# in every round, the order alternating: "raw" straight to the sink, "plain"
# through rockd's plain relay, "rock" the same program under the rock
# wrapper (its socket a rock) through rockd. Medians of ROUNDS; ratios
# rock/plain and rock/raw, and ns per write.
#
# Epoll: write-bench-epoll opens CONNS connections through rockd to echod,
# registers them all with one epoll set and runs 64-byte request/response
# rounds on all of them (readiness by epoll_wait). It
# prints its main thread's user and system CPU (getrusage RUSAGE_THREAD:
# the engine's own thread is not in it): under the rock wrapper user time is
# the shim plus the program, system time the kernel calls they make. The
# plain run (no wrapper) is the program alone.
#
# Environment: BUILDDIR (default two levels above this script);
# WB_BLOCKS, block sizes to run (default 64 256 1024 4096 16384 65536);
# WB_BEFORE, another build's tools/rock: a "before" column, the same client
# under that build's shim, in the same rounds (before/after in one run).
# Prints tables, never a verdict; exit status 0 unless something failed.

set -u

me=write-bench.sh
rounds=${1:-5}
conns=${2:-2000}

# die, tmp, pids and the exit trap
# shellcheck source=bench-lib.sh
. "$(dirname -- "$0")/bench-lib.sh"

bench_programs



start_backend sink
sink=$backend_port
# echod: thousands of connections (rock-bench's echo takes 1,024)
echo_port=$("$bench" freeport | awk '{ print $2 }')
"$echod" "$echo_port" 2>"$tmp/echod.log" &
pids+=($!)
sink_front=$("$bench" freeport | awk '{ print $2 }')
echo_front=$("$bench" freeport | awk '{ print $2 }')
ulimit -n "$(ulimit -Hn)" 2>/dev/null
"$rockd" -F --listen "127.0.0.1:$sink_front" --backend "127.0.0.1:$sink" \
	--listen "127.0.0.1:$echo_front" --backend "127.0.0.1:$echo_port" 2>"$tmp/rockd.log" &
pids+=($!)
for ((i = 0; i < 100; i++)); do
	"$bench" connect plain 127.0.0.1 "$sink_front" 1 >/dev/null 2>&1 &&
		"$bench" connect plain 127.0.0.1 "$echo_front" 1 >/dev/null 2>&1 && break
	sleep 0.05
done

# upload KIND BLOCK TOTAL: MB/s
upload() {
	local -a pre=() port=$sink_front
	case $1 in
	raw) port=$sink ;;
	rock) pre=("$wrapper") ;;
	before) pre=("$WB_BEFORE") ;;
	esac
	"${pre[@]}" "$bench" throughput plain 127.0.0.1 "$port" "$2" "$3" 2>>"$tmp/run.err" |
		awk '$1 == "throughput" { print $NF }'
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

kinds=(raw plain rock)
[ -n "${WB_BEFORE:-}" ] && kinds+=(before)
read -r -a blocks <<<"${WB_BLOCKS:-64 256 1024 4096 16384 65536}"
declare -A total=([64]=6000000 [256]=20000000 [1024]=60000000
	[4096]=150000000 [16384]=250000000 [65536]=250000000)
declare -A med
for b in "${blocks[@]}"; do
	declare -A vals=()
	for k in "${kinds[@]}"; do upload "$k" "$b" "${total[$b]}" >/dev/null; done
	for ((r = 1; r <= rounds; r++)); do
		order=("${kinds[@]}")
		if ((r % 2 == 0)); then
			order=()
			for ((i = ${#kinds[@]} - 1; i >= 0; i--)); do order+=("${kinds[i]}"); done
		fi
		for k in "${order[@]}"; do
			v=$(upload "$k" "$b" "${total[$b]}")
			[ -n "$v" ] || die "upload $k $b failed: $(tail -n 2 "$tmp/run.err")"
			vals[$k]="${vals[$k]:-} $v"
		done
	done
	for k in "${kinds[@]}"; do
		# shellcheck disable=SC2086 # space-separated numbers
		med[$b/$k]=$(median ${vals[$k]})
	done
	unset vals
done

echo "upload MB/s, medians of $rounds rounds (blocking write() of BLOCK bytes; loopback)"
printf '%-8s %9s %9s %9s %11s %9s %12s %12s' block raw plain rock rock/plain rock/raw "plain ns/wr" "rock ns/wr"
[ -n "${WB_BEFORE:-}" ] && printf ' %9s %13s' before before/plain
echo
for b in "${blocks[@]}"; do
	awk -v b="$b" -v raw="${med[$b/raw]}" -v pl="${med[$b/plain]}" -v rk="${med[$b/rock]}" \
	    -v bf="${med[$b/before]:-}" 'BEGIN {
		printf "%-8s %9.1f %9.1f %9.1f %11.2f %9.2f %12.0f %12.0f", b, raw, pl, rk,
		    rk / pl, rk / raw, b * 1000 / pl, b * 1000 / rk
		if (bf != "")
			printf " %9.1f %13.2f", bf, bf / pl
		printf "\n" }'
done

echo
echo "epoll client: $conns connections through rockd, 64-byte request/response rounds on all of them"
printf '%-6s %10s %10s %10s %10s %12s %14s\n' kind "register" "user s" "sys s" "user/sys" "round trips" "process u/s"
ekinds=(plain rock)
[ -n "${WB_BEFORE:-}" ] && ekinds+=(before)
for k in "${ekinds[@]}"; do
	pre=()
	[ "$k" = rock ] && pre=("$wrapper")
	[ "$k" = before ] && pre=("$WB_BEFORE")
	out=$("${pre[@]}" "$epollc" 127.0.0.1 "$echo_front" "$conns" 2>>"$tmp/run.err") ||
		die "epoll client ($k) failed: $(tail -n 2 "$tmp/run.err")"
	awk -v k="$k" '$1 == "epoll" { printf "%-6s %8.1fms %10.3f %10.3f %10.2f %12d %6.3f/%-6.3f\n",
	    k, $3, $5, $7, $5 / $7, $9, $11, $13 }' <<<"$out"
done
echo "register: the CONNS epoll_ctl(ADD) calls alone, timed (not the connects);"
echo "user/sys: main thread only (RUSAGE_THREAD); rock user = shim + program, sys = kernel calls;"
echo "process u/s: the whole process (RUSAGE_SELF), the engine's thread included"
exit 0
