#!/usr/bin/env bash
# relay-bench.sh: many connections doing 64-byte request/response through rockd (plain and rock) against raw TCP to the same echo server, with every process's CPU per round trip; prints a table, never a verdict.
#
# Usage: relay-bench.sh [ROUNDS] [CONNS]   (defaults 5 and 2000; any user)
#
# write-bench-epoll opens CONNS connections to tests/echod, registers them
# with one epoll set and, for RB_SECONDS (default 2), writes 64 bytes on
# every one and waits until each has its 64 bytes back, round after round.
# Kinds: "raw" straight to echod; "plain" through rockd's plain relay;
# "rock" the same client under tools/rock through rockd. One rockd (one
# worker) fronts echod for the whole run. Every round runs each kind once,
# the order alternating; figures are medians of ROUNDS, after one warm-up
# run of each kind.
#
# Columns: round trips per second and the ratio to raw; then CPU time per
# round trip (us) of the client process (its engine thread included),
# echod and rockd, sampled at the start and the end of the rounds only
# (not the connects and closes), and their sum. rockd's CPU per round trip
# next to the client's plus echod's says what relaying costs: a relay on a
# machine whose cores the client and server already fill cannot exceed
# (client + echod) / (client + echod + rockd) of raw.
#
# Environment: BUILDDIR (default two levels above this script),
# RB_SECONDS. Exit status 0 unless something failed to run.

set -u

me=relay-bench.sh
rounds=${1:-5}
conns=${2:-2000}
secs=${RB_SECONDS:-2}

# die, tmp, pids and the exit trap
# shellcheck source=bench-lib.sh
. "$(dirname -- "$0")/bench-lib.sh"

bench_programs
ulimit -n "$(ulimit -Hn)" 2>/dev/null
[ "$(ulimit -n)" -ge $((2 * conns + 256)) ] ||
	die "$((2 * conns + 256)) descriptors needed, the limit is $(ulimit -n)"

echo_port=$("$bench" freeport | awk '{ print $2 }')
"$echod" "$echo_port" 2>"$tmp/echod.log" &
echod_pid=$!
pids+=("$echod_pid")
front=$("$bench" freeport | awk '{ print $2 }')
start_rockd "$front" "$echo_port"
hz=$(getconf CLK_TCK)

# run KIND: "TRIPS_PER_S CLIENT_US ECHOD_US ROCKD_US" per round trip
run() {
	local -a pre=()
	local port=$front out="$tmp/run.out" e0='' r0='' e1 r1 i line=''
	case $1 in
	raw) port=$echo_port ;;
	rock) pre=("$wrapper") ;;
	esac
	: >"$out"
	"${pre[@]}" "$epollc" 127.0.0.1 "$port" "$conns" "$secs" 500 >"$out" 2>>"$tmp/run.err" &
	local cpid=$!
	for ((i = 0; i < 3000 && ${#e0} == 0; i++)); do
		if grep -q '^window' "$out"; then
			e0=$(ticks "$echod_pid") r0=$(ticks "$rockd_pid")
		else
			sleep 0.01
		fi
	done
	for ((i = 0; i < 3000; i++)); do
		line=$(grep '^epoll' "$out") && break
		sleep 0.01
	done
	e1=$(ticks "$echod_pid")
	r1=$(ticks "$rockd_pid")
	wait "$cpid" || die "$1 client failed: $(tail -n 2 "$tmp/run.err")"
	if [ -z "$e0" ] || [ -z "$line" ]; then die "$1 client printed no window"; fi
	awk -v hz="$hz" -v e="$((e1 - e0))" -v r="$((r1 - r0))" -v secs="$secs" '{
		t = $9; printf "%.0f %.2f %.2f %.2f\n", t / secs,
		    ($11 + $13) * 1e6 / t, e / hz * 1e6 / t, r / hz * 1e6 / t }' <<<"$line"
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

kinds=(raw plain rock)
declare -A rate cl ec rd
for k in "${kinds[@]}"; do run "$k" >/dev/null; done
for ((r = 1; r <= rounds; r++)); do
	order=("${kinds[@]}")
	((r % 2 == 0)) && order=(rock plain raw)
	for k in "${order[@]}"; do
		read -r t c e d <<<"$(run "$k")"
		echo "round $r/$rounds $k: $t trips/s; us per trip client $c echod $e rockd $d" >&2
		rate[$k]+=" $t" cl[$k]+=" $c" ec[$k]+=" $e" rd[$k]+=" $d"
	done
done

echo "$conns connections, 64-byte request/response, ${secs} s per run; medians of $rounds rounds; loopback, rockd with one worker"
printf '%-6s %12s %7s %11s %9s %9s %9s\n' kind "trips/s" "x raw" "client us" "echod us" "rockd us" "sum us"
# shellcheck disable=SC2086 # space-separated numbers
raw=$(median ${rate[raw]})
for k in "${kinds[@]}"; do
	# shellcheck disable=SC2086
	awk -v k="$k" -v t="$(median ${rate[$k]})" -v raw="$raw" -v c="$(median ${cl[$k]})" \
	    -v e="$(median ${ec[$k]})" -v d="$(median ${rd[$k]})" 'BEGIN {
		printf "%-6s %12.0f %7.2f %11.2f %9.2f %9.2f %9.2f\n", k, t, t / raw, c, e, d, c + e + d }'
done
echo "us per trip: CPU (user + system) over the rounds divided by the round trips; client: the"
echo "whole process (under rock, its engine thread too); echod and rockd: /proc ticks ($hz/s)"
exit 0
