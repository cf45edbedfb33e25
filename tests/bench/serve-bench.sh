#!/usr/bin/env bash
# serve-bench.sh: ping-pong round trip rock-to-rock with no rockd (an echo server under rock with ROCK_SERVE=1, a client under rock) against the same pair without rock, on loopback; prints medians and the difference, never a verdict.
#
# Usage: serve-bench.sh [ROUNDS]          (ROUNDS defaults to 5)
#
# Environment:
#   BUILDDIR      top build directory (default: two levels above this
#                 script); uses $BUILDDIR/tests/bench/rock-bench
#   ROCK_BENCH    path of the rock-bench binary (overrides BUILDDIR)
#   ROCK_WRAPPER  path of the rock wrapper (default $BUILDDIR/tools/rock)
#   SERVE_BENCH_CPU  the CPU every process runs on (taskset; default the
#                 last online one); empty: unpinned. Unpinned, the
#                 scheduler's placement makes loopback round trips bimodal
#                 (17 or 90-100 us on a 2-vCPU VM, raw and rock alike, run
#                 to run), which drowns a difference of a few us.
#
# Two echo servers (rock-bench echo): "raw" as it is, and one under the
# rock wrapper with ROCK_SERVE=1, whose listener accepts rocks itself. The
# client is rock-bench's plain latency client (write BLOCK bytes, read them
# back, Nagle left on), straight to the raw server for "raw" and under the
# rock wrapper to the rock server for "rock": a rock at both ends, each
# program's own calls on the kernel socket (direct mode), the engines off
# the path. Each figure is the median of ROUNDS runs; a run is the median of
# up to 1000 round trips (1 s at most) in a new client process; the order
# alternates between rounds, after one discarded warm-up run of each. The
# issue 11 target, "within +5 us of raw TCP", is printed as a label only.
# Exit status 0 unless something failed to run (or the rock client did not
# get a rock: then the figures would be raw against raw).

set -u

me=serve-bench.sh

# die, tmp, pids, bench_setup, start_backend, median and the exit trap
# shellcheck source=bench-lib.sh
. "$(dirname -- "$0")/bench-lib.sh"

bench_setup "$@"

cpu=${SERVE_BENCH_CPU-$(($(nproc) - 1))}
pin=() where=unpinned
if [ -n "$cpu" ]; then
	where="all on CPU $cpu"
	command -v taskset >/dev/null || die "taskset not found (util-linux), or set SERVE_BENCH_CPU="
	pin=(taskset -c "$cpu")
	"${pin[@]}" true || die "cannot run on CPU $cpu (SERVE_BENCH_CPU)"
fi

blocks=(1 64)
trips=1000
target_us=5

# The server's key is made in the scratch directory; the client keeps no
# server keys (a fresh key on a port reused later must not be refused)
# and shares its probe results only with the runs of this script.
start_backend echo raw-echo "${pin[@]}"
raw_port=$backend_port
start_backend echo rock-echo "${pin[@]}" env ROCK_SERVE=1 XDG_STATE_HOME="$tmp/state" \
	ROCK_DEBUG=1 ROCK_LOG="$tmp/rock-echo.rocklog" "$wrapper"
rock_port=$backend_port
client=(env ROCK_KNOWN_SERVERS= ROCK_PROBE_CACHE="$tmp/probes" "$wrapper")

# run_one raw|rock BLOCK: prints the run's median round trip in us
run_one() {
	local kind=$1 block=$2 out port=$raw_port
	local -a pre=("${pin[@]}")
	if [ "$kind" = rock ]; then
		pre+=("${client[@]}") port=$rock_port
	fi
	if ! out=$("${pre[@]}" "$bench" latency plain 127.0.0.1 "$port" "$block" "$trips" 2>"$tmp/run.err"); then
		die "'rock-bench latency plain 127.0.0.1 $port $block $trips' ($kind) failed: $(cat "$tmp/run.err")"
	fi
	[ -s "$tmp/run.err" ] && sed "s/^/  ($kind $block) /" "$tmp/run.err" >&2
	out=$(printf '%s\n' "$out" | awk '$1 == "latency" && $NF ~ /^[0-9]+(\.[0-9]+)?$/ { print $NF }')
	[ -n "$out" ] || die "unexpected output from 'rock-bench latency' ($kind)"
	echo "$out"
}

declare -A result diffs
echo "$me: echo servers on 127.0.0.1:$raw_port (raw) and 127.0.0.1:$rock_port" \
	"(under rock, ROCK_SERVE=1); $rounds rounds; $where"
for b in "${blocks[@]}"; do
	# Warm-up: discarded (and the rock client's probe result cached).
	run_one raw "$b" >/dev/null
	run_one rock "$b" >/dev/null
	raw=() rock=() d=()
	for ((r = 1; r <= rounds; r++)); do
		if ((r % 2)); then
			raw+=("$(run_one raw "$b")") || exit 1
			rock+=("$(run_one rock "$b")") || exit 1
		else
			rock+=("$(run_one rock "$b")") || exit 1
			raw+=("$(run_one raw "$b")") || exit 1
		fi
		d+=("$(awk -v a="${rock[-1]}" -v b="${raw[-1]}" 'BEGIN { printf "%.1f", a - b }')")
		printf '%-12s round %d/%d: raw %s rock %s\n' "$b B" "$r" "$rounds" "${raw[-1]}" "${rock[-1]}"
	done
	result[$b/raw]=$(median "${raw[@]}")
	result[$b/rock]=$(median "${rock[@]}")
	diffs[$b]=$(median "${d[@]}")
done
# Every rock run, warm-ups included, must have been a rock.
rock_runs=$(((rounds + 1) * ${#blocks[@]}))
accepted=$(grep -c 'an accepted rock' "$tmp/rock-echo.rocklog" 2>/dev/null)
[ "${accepted:-0}" -eq "$rock_runs" ] ||
	die "the rock server accepted ${accepted:-0} rocks for $rock_runs rock runs: not rock-to-rock"

echo
echo "round trip us, medians of $rounds rounds; loopback, no rockd, $where; each rock run a rock ($accepted accepted)"
printf '%-10s %10s %10s %10s %10s %16s\n' "" raw rock-rock "rock-raw" rock/raw "target"
for b in "${blocks[@]}"; do
	diff=$(awk -v a="${result[$b/rock]}" -v b="${result[$b/raw]}" 'BEGIN { printf "%+.1f", a - b }')
	printf '%-10s %10s %10s %10s %10s %16s\n' "  $b B" "${result[$b/raw]}" "${result[$b/rock]}" \
		"$diff" "$(awk -v a="${result[$b/rock]}" -v b="${result[$b/raw]}" 'BEGIN { printf "%.3g", a / b }')" \
		"$(awk -v d="$diff" -v t="$target_us" 'BEGIN { print (d <= t) ? "within +" t " us" : "OVER +" t " us" }')"
done
echo "median of the per-round differences: $(for b in "${blocks[@]}"; do printf '%s B %+.1f us, ' "$b" "${diffs[$b]}"; done | sed 's/, $//')"
echo "a run: up to $trips round trips (after 5 unmeasured) in 1 s at most, a new client process"
exit 0
