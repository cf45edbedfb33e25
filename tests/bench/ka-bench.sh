#!/bin/sh
# ka-bench.sh: compare socket()/connect() cost raw vs. under `rock --keepalive-only` and print median ratios.
#
# Usage: ka-bench.sh [ROUNDS]          (ROUNDS defaults to 11)
#
# Environment:
#   BUILDDIR           top build directory (default: two levels above this
#                      script); the benchmark is $BUILDDIR/tests/bench/ka-bench
#   KA_BENCH           path of the ka-bench binary (overrides BUILDDIR lookup)
#   KA_ROCK            path of the rock wrapper (default: $BUILDDIR/tools/rock,
#                      then tools/rock next to this script's source tree)
#   KA_SOCKET_ITERS    iterations per socket run   (default 80000)
#   KA_CONNECT_ITERS   iterations per connect run  (default 12000)
#                      (defaults give ~0.4 s per run on a 2-vCPU VM where
#                      socket+close costs ~5.7 us and a loopback connect
#                      lifecycle ~35 us; raise them on faster machines)
#
# Each round runs the raw and the rock case back to back, alternating which
# goes first, after one discarded warmup round.  Before measuring, `ka-bench
# verify` must report keepalive=1 idle=30 under rock (and keepalive=0 raw),
# so the benchmark cannot silently compare raw with raw.  The result is a
# report, not a test: the exit status is 0 unless something failed to run.

set -eu

me=ka-bench.sh

die() {
    echo "$me: error: $*" >&2
    exit 1
}

is_posint() {
    case $1 in
        '' | *[!0-9]* | 0*) return 1 ;;
        *) ;;
    esac
    return 0
}

rounds=${1:-11}
[ $# -le 1 ] || die "usage: $me [ROUNDS]"
is_posint "$rounds" || die "ROUNDS must be a positive integer, got '$rounds'"

socket_iters=${KA_SOCKET_ITERS:-80000}
connect_iters=${KA_CONNECT_ITERS:-12000}
is_posint "$socket_iters" || die "KA_SOCKET_ITERS must be a positive integer"
is_posint "$connect_iters" || die "KA_CONNECT_ITERS must be a positive integer"

script_dir=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd) ||
    die "cannot locate the script directory"
srcdir_top=$(CDPATH='' cd -- "$script_dir/../.." && pwd) ||
    die "cannot locate the source top directory"
builddir=${BUILDDIR:-$srcdir_top}

bench=${KA_BENCH:-$builddir/tests/bench/ka-bench}
if [ ! -f "$bench" ] || [ ! -x "$bench" ]; then
    die "benchmark binary not found or not executable: $bench (build it, or set BUILDDIR/KA_BENCH)"
fi

if [ -n "${KA_ROCK:-}" ]; then
    rock=$KA_ROCK
elif [ -x "$builddir/tools/rock" ]; then
    rock=$builddir/tools/rock
else
    rock=$srcdir_top/tools/rock
fi
if [ ! -f "$rock" ] || [ ! -x "$rock" ]; then
    die "rock wrapper not found or not executable: $rock (set BUILDDIR or KA_ROCK)"
fi

# The keepalive settings used for the rock runs; verify checks idle=30.
ka_time=30
ka_intvl=5
ka_probes=4

# Raw runs get a clean environment so an inherited LD_PRELOAD or ROCK_*
# cannot turn them into rock runs.
run_raw() {
    env -u LD_PRELOAD -u ROCK_MODE -u ROCK_KEEPALIVE_TIME \
        -u ROCK_KEEPALIVE_INTVL -u ROCK_KEEPALIVE_PROBES "$bench" "$@"
}

run_rock() {
    env ROCK_KEEPALIVE_TIME=$ka_time ROCK_KEEPALIVE_INTVL=$ka_intvl \
        ROCK_KEEPALIVE_PROBES=$ka_probes \
        "$rock" --keepalive-only "$bench" "$@"
}

# field NAME LINE: value of NAME=VALUE among the space-separated words of LINE
field() {
    printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

# --- verify that the preload is really active under rock -----------------
if ! out=$(run_raw verify); then
    die "raw 'ka-bench verify' failed"
fi
echo "raw:  $out"
[ "$(field keepalive "$out")" = 0 ] ||
    die "raw run already has SO_KEEPALIVE on (preload leaking into raw runs?)"

if ! out=$(run_rock verify); then
    die "'rock --keepalive-only ka-bench verify' failed"
fi
echo "rock: $out"
if [ "$(field keepalive "$out")" != 1 ] ||
    [ "$(field idle "$out")" != "$ka_time" ]; then
    die "librock is not active under rock: expected keepalive=1 idle=$ka_time"
fi
echo

# --- measurement -----------------------------------------------------------

# one_run raw|rock MODE ITERS: prints ns/op
# (plain sh has no locals: the or_* names must not clash with the caller's)
one_run() {
    or_kind=$1
    or_mode=$2
    or_iters=$3
    if ! or_line=$("run_$or_kind" "$or_mode" "$or_iters"); then
        die "$or_kind run of 'ka-bench $or_mode $or_iters' failed"
    fi
    or_ns=$(printf '%s\n' "$or_line" | awk -v m="$or_mode" -v n="$or_iters" \
        '$1 == m && $2 == n && NF == 3 && $3 ~ /^[0-9]+(\.[0-9]+)?$/ { print $3 }')
    [ -n "$or_ns" ] ||
        die "unexpected output from $or_kind 'ka-bench $or_mode $or_iters': $or_line"
    printf '%s\n' "$or_ns"
}

# median of the whitespace-separated numbers in $1
median() {
    printf '%s\n' "$1" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) exit 1
            if (NR % 2) m = v[(NR + 1) / 2]
            else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.*f\n", (m < 10 ? 3 : 1), m
        }'
}

# spread of the numbers in $1 as "min-max (+-N% of median M)"
spread() {
    printf '%s\n' "$1" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk -v med="$2" '
        NR == 1 { lo = $1 } { hi = $1 }
        END { printf "%.1f-%.1f (%.1f%% of median)", lo, hi, (hi - lo) * 100 / med }'
}

results=
notes=

for mode in socket connect; do
    case $mode in
        socket) iters=$socket_iters; target=1.05 ;;
        connect) iters=$connect_iters; target=1.10 ;;
        *) die "internal error: unknown mode $mode" ;;
    esac

    warm=$((iters / 5))
    [ "$warm" -gt 0 ] || warm=1
    one_run raw "$mode" "$warm" >/dev/null
    one_run rock "$mode" "$warm" >/dev/null

    raw_list=
    rock_list=
    pair_list=
    r=1
    while [ "$r" -le "$rounds" ]; do
        if [ $((r % 2)) -eq 1 ]; then
            a=$(one_run raw "$mode" "$iters")
            b=$(one_run rock "$mode" "$iters")
        else
            b=$(one_run rock "$mode" "$iters")
            a=$(one_run raw "$mode" "$iters")
        fi
        printf '%-8s round %2d/%d: raw %10s  rock %10s ns/op\n' \
            "$mode" "$r" "$rounds" "$a" "$b"
        raw_list="$raw_list $a"
        rock_list="$rock_list $b"
        pair_list="$pair_list $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b / a }')"
        r=$((r + 1))
    done

    raw_med=$(median "$raw_list")
    rock_med=$(median "$rock_list")
    row=$(awk -v m="$mode" -v a="$raw_med" -v b="$rock_med" -v t="$target" '
        BEGIN {
            ratio = b / a
            verdict = (ratio <= t) ? "within target" : "OVER TARGET"
            printf "%-8s %14.1f %14.1f %7.3f %7.2f  %s\n", m, a, b, ratio, t, verdict
        }')
    results="$results$row
"
    pair_med=$(median "$pair_list")
    notes="${notes}$mode: $iters iterations/run; raw $(spread "$raw_list" "$raw_med"), rock $(spread "$rock_list" "$rock_med"); median of per-round ratios $pair_med
"
done

echo
printf '%-8s %14s %14s %7s %7s  %s\n' mode "raw ns/op" "rock ns/op" ratio target result
printf '%s' "$results"
echo
echo "medians over $rounds rounds; per-run spread (min-max), and the median of the per-round rock/raw ratios:"
printf '%s' "$notes"
exit 0
