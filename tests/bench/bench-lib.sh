# bench-lib.sh: what the loopback benchmark scripts share: a scratch directory, the processes to stop, and an exit that stops them and keeps the logs only on failure.
# shellcheck shell=bash
#
# Source it after setting me (the script's name); it sets tmp and pids.
# start_backend needs bench, the rock-bench binary.

die() {
	echo "$me: error: $*" >&2
	exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$me.XXXXXX") || die "mktemp failed"
pids=()
# shellcheck disable=SC2317 # run by the trap
bench_cleanup() {
	local rc=$? p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	# Nothing written (a usage error, say): nothing to keep.
	if [ "$rc" -eq 0 ] || [ -z "$(ls -A "$tmp" 2>/dev/null)" ]; then
		rm -rf "$tmp"
	else
		echo "$me: logs kept in $tmp" >&2
	fi
	exit "$rc"
}
trap bench_cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# start_backend sink|echo|source [NAME [COMMAND...]]: rock-bench's server
# of that kind ($bench) on a free port, run by COMMAND (a wrapper) if
# given, its files $tmp/NAME.*; sets backend_port (not in a command
# substitution: the exit must know its pid)
start_backend() {
	local kind=$1 name=${2:-$1} i
	shift $(($# < 2 ? $# : 2))
	backend_port=
	"$@" "$bench" "$kind" 0 >"$tmp/$name.port" 2>"$tmp/$name.log" &
	pids+=($!)
	for ((i = 0; i < 100; i++)); do
		backend_port=$(awk '$1 == "port" { print $2 }' "$tmp/$name.port")
		[ -n "$backend_port" ] && return 0
		sleep 0.05
	done
	die "the $name backend did not start: $(cat "$tmp/$name.log")"
}

# start_rockd FRONT BACKEND: $rockd on 127.0.0.1:FRONT relaying to
# 127.0.0.1:BACKEND, its log $tmp/rockd.log; sets rockd_pid once a plain
# connect goes through it (not in a command substitution: see above)
start_rockd() {
	local i
	"$rockd" -F --listen "127.0.0.1:$1" --backend "127.0.0.1:$2" \
		2>"$tmp/rockd.log" &
	rockd_pid=$!
	pids+=("$rockd_pid")
	for ((i = 0; i < 100; i++)); do
		"$bench" connect plain 127.0.0.1 "$1" 1 >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	die "rockd did not start: $(tail -n 3 "$tmp/rockd.log")"
}

# ticks PID: user + system clock ticks so far of a process and its
# children (rockd's workers, one per CPU by default)
ticks() {
	local p
	for p in "$1" $(pgrep -P "$1"); do cat "/proc/$p/stat"; done 2>/dev/null |
		awk '{ s += $14 + $15 } END { print s + 0 }'
}

# median NUMBER...: to one decimal
median() {
	printf '%s\n' "$@" | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR % 2) m = v[(NR + 1) / 2]
			else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.1f\n", m
		}'
}

# bench_setup [ROUNDS]: the scripts' one argument, checked into rounds
# (default 5), and builddir, bench (rock-bench) and wrapper (tools/rock),
# as BUILDDIR, ROCK_BENCH and ROCK_WRAPPER say
bench_setup() {
	local script_dir
	rounds=${1:-5}
	case $rounds in
	'' | *[!0-9]* | 0*) die "usage: $me [ROUNDS] (a positive integer)" ;;
	*) ;;
	esac
	[ $# -le 1 ] || die "usage: $me [ROUNDS]"
	script_dir=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd) ||
		die "cannot locate the script directory"
	builddir=${BUILDDIR:-$script_dir/../..}
	bench=${ROCK_BENCH:-$builddir/tests/bench/rock-bench}
	wrapper=${ROCK_WRAPPER:-$builddir/tools/rock}
	[ -x "$bench" ] || die "$bench not built (make tests/bench/rock-bench, or set BUILDDIR/ROCK_BENCH)"
	[ -x "$wrapper" ] || die "$wrapper not built (set BUILDDIR/ROCK_WRAPPER)"
}

# bench_programs: sets builddir (BUILDDIR, else two levels above the
# script) and the programs the many-connection benchmarks run: bench,
# epollc, echod, rockd and wrapper; dies unless each is built.
bench_programs() {
	local script_dir f
	script_dir=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd) || die "no script directory"
	builddir=${BUILDDIR:-$script_dir/../..}
	bench=$builddir/tests/bench/rock-bench
	epollc=$builddir/tests/bench/write-bench-epoll
	echod=$builddir/tests/echod
	rockd=$builddir/daemon/rockd
	wrapper=$builddir/tools/rock
	for f in "$bench" "$epollc" "$echod" "$rockd" "$wrapper"; do
		[ -x "$f" ] || die "$f not built"
	done
}
