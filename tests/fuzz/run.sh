#!/usr/bin/env bash
# run.sh: make check's runner of one libFuzzer harness: its seed corpus, a bounded time, and a kept input on a crash.
set -u
. "$(dirname "$0")/../lib.sh"
trap t_finish EXIT
[ $# -eq 1 ] || t_skip_all "usage: run.sh HARNESS.fuzz"
harness=$1
name=$(basename "$harness" .fuzz)
[ -z "${ROCK_FUZZ_MISSING:-}" ] || t_skip_all "$name: $ROCK_FUZZ_MISSING"
[ -x "$harness" ] || t_skip_all "$name: $harness not built"
seconds=${ROCK_FUZZ_SECONDS:-20}
seeds="$top_srcdir/tests/fuzz/corpus/$name"

# libFuzzer adds what it finds to its first corpus directory: a working
# copy, never the source tree (read-only in distcheck).
mkdir -p "$t_tmp/corpus" "$t_tmp/crash"
[ -d "$seeds" ] && cp "$seeds"/* "$t_tmp/corpus/" 2>/dev/null
n=$(find "$t_tmp/corpus" -type f | wc -l)
echo "$name: $n seeds, ${seconds} s"
# libFuzzer's own exit codes would read as SKIP (77) or an odd failure:
# every finding is exit 1. -timeout: one input running that long is a hang.
# At low priority: the network tests beside it measure time.
nice -n 19 "$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
	-artifact_prefix="$t_tmp/crash/" "$t_tmp/corpus" >"$t_tmp/fuzz.log" 2>&1
rc=$?
grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' \
	"$t_tmp/fuzz.log"
if [ "$rc" -ne 0 ]; then
	tail -n 60 "$t_tmp/fuzz.log"
	for f in "$t_tmp"/crash/*; do
		[ -e "$f" ] && echo "$name: the input that failed: $f (run: $harness $f)"
	done
fi
t_eq "$name: no crash, leak or hang in ${seconds} s (exit code)" "$rc" 0
# The seeds alone must all have run: a harness that rejects its own
# corpus would fuzz nothing useful.
t_check "$name: libFuzzer ran inputs" grep -q '^stat::number_of_executed_units' "$t_tmp/fuzz.log"
t_done
