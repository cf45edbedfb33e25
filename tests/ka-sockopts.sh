#!/usr/bin/env bash
# ka-sockopts.sh: keepalive options seen through getsockopt under every configuration of librock.
set -u
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT
prog="$top_builddir/tests/ka-sockopts"
clean_env() { env -u ROCK_MODE -u ROCK_KEEPALIVE_TIME -u ROCK_KEEPALIVE_INTVL \
	-u ROCK_KEEPALIVE_PROBES -u ROCK_USER_TIMEOUT_MS -u ROCK_DEBUG -u ROCK_LOG \
	-u DD_DEBUG -u DD_TCP_KEEPALIVE_TIME -u DD_TCP_KEEPALIVE_INTVL \
	-u DD_TCP_KEEPALIVE_PROBES -u DD_USE_KEEPALIVE -u DD_EVAL_ENVIRONMENT_ONCE "$@"; }

# run NAME EXPECT... -- ENV...: ka-sockopts under rock --keepalive-only.
run() {
	local name=$1 mode=$2 ka=$3 idle=$4 intvl=$5 cnt=$6 uto=$7
	shift 7
	if clean_env "$@" "$ROCK" --keepalive-only "$prog" "$mode" "$ka" "$idle" "$intvl" \
		"$cnt" "$uto" >"$t_tmp/out" 2>"$t_tmp/err"; then
		t_ok "$name"
	else
		t_bad "$name"
		sed 's/^/    /' "$t_tmp/out" "$t_tmp/err"
	fi
}

run "ROCK_* names" check 1 1 1 3 4000 \
	ROCK_KEEPALIVE_TIME=1 ROCK_KEEPALIVE_INTVL=1 ROCK_KEEPALIVE_PROBES=3 ROCK_USER_TIMEOUT_MS=4000
run "DD_* names" check 1 7 8 9 -1 \
	DD_TCP_KEEPALIVE_TIME=7 DD_TCP_KEEPALIVE_INTVL=8 DD_TCP_KEEPALIVE_PROBES=9
run "ROCK_* wins over DD_*" check 1 11 12 13 -1 \
	DD_TCP_KEEPALIVE_TIME=7 DD_TCP_KEEPALIVE_INTVL=8 DD_TCP_KEEPALIVE_PROBES=9 \
	ROCK_KEEPALIVE_TIME=11 ROCK_KEEPALIVE_INTVL=12 ROCK_KEEPALIVE_PROBES=13
run "nothing configured: SO_KEEPALIVE only" check 1 -1 -1 -1 -1
run "DD_USE_KEEPALIVE=0 leaves SO_KEEPALIVE off" check 0 5 -1 -1 -1 \
	DD_USE_KEEPALIVE=0 ROCK_KEEPALIVE_TIME=5
run "bad values are ignored" check 1 -1 6 -1 -1 \
	ROCK_KEEPALIVE_TIME=abc DD_TCP_KEEPALIVE_PROBES=128 ROCK_KEEPALIVE_INTVL=6 \
	ROCK_USER_TIMEOUT_MS=-5
run "DD_EVAL_ENVIRONMENT_ONCE=0 re-reads per socket" reread 1 3 -1 -1 -1 \
	DD_EVAL_ENVIRONMENT_ONCE=0 ROCK_KEEPALIVE_TIME=3
# Read once (the default): the program's setenv must not show, so the
# "after setenv" checks of ka-sockopts are expected to fail here.
clean_env ROCK_KEEPALIVE_TIME=3 "$ROCK" --keepalive-only "$prog" reread 1 3 -1 -1 -1 \
	>"$t_tmp/out" 2>&1
t_check "read once: first socket" grep -q '^PASS: before setenv' "$t_tmp/out"
t_check "read once: a later setenv is not seen" \
	grep -q '^FAIL: after setenv ROCK_KEEPALIVE_TIME=21: SO_KEEPALIVE=1 TCP_KEEPIDLE=3 ' "$t_tmp/out"

# Each bad value is reported once on stderr, naming variable, value and range.
clean_env ROCK_KEEPALIVE_TIME=abc ROCK_KEEPALIVE_PROBES=128 DD_EVAL_ENVIRONMENT_ONCE=0 \
	"$ROCK" --keepalive-only "$prog" check 1 -1 -1 -1 -1 >/dev/null 2>"$t_tmp/err"
t_eq "bad ROCK_KEEPALIVE_TIME reported once" \
	"$(grep -c 'ROCK_KEEPALIVE_TIME="abc" ignored (not a decimal integer); accepted: seconds, 1 to 32767' "$t_tmp/err")" 1
t_eq "bad ROCK_KEEPALIVE_PROBES reported once" \
	"$(grep -c 'ROCK_KEEPALIVE_PROBES="128" ignored (too large); accepted: a count, 1 to 127' "$t_tmp/err")" 1
t_eq "nothing else on stderr" "$(wc -l <"$t_tmp/err")" 2

# A log file that cannot be written is reported once, not swallowed, and
# the warnings that follow still reach stderr.
clean_env ROCK_LOG="$t_tmp/no-such-dir/rock.log" ROCK_KEEPALIVE_TIME=abc \
	"$ROCK" --keepalive-only "$prog" check 1 -1 -1 -1 -1 >/dev/null 2>"$t_tmp/err"
t_eq "unwritable ROCK_LOG reported once" \
	"$(grep -c "ROCK_LOG=\"$t_tmp/no-such-dir/rock.log\" ignored (cannot write: No such file or directory); logging to syslog, warnings to stderr too" "$t_tmp/err")" 1
t_eq "unwritable ROCK_LOG: the next warning on stderr" \
	"$(grep -c 'ROCK_KEEPALIVE_TIME="abc" ignored' "$t_tmp/err")" 1
t_check "unwritable ROCK_LOG: no file made" test ! -e "$t_tmp/no-such-dir"

# ROCK_MODE=off touches nothing, even with values set; plain rock mode has the baseline.
if clean_env ROCK_MODE=off ROCK_KEEPALIVE_TIME=5 LD_PRELOAD="$LIBROCK_PRELOAD" \
	"$prog" check 0 -1 -1 -1 -1 >"$t_tmp/out" 2>&1; then t_ok "ROCK_MODE=off"; else
	t_bad "ROCK_MODE=off"; cat "$t_tmp/out"; fi
# Its listeners plain (ROCK_SERVE=0): the program closes connections to
# them before any byte, which a served listener takes for EDP probes.
if clean_env ROCK_KEEPALIVE_TIME=5 ROCK_SERVE=0 "$ROCK" "$prog" check 1 5 -1 -1 -1 >"$t_tmp/out" 2>&1; then
	t_ok "rock mode has the keepalive baseline"; else t_bad "rock mode baseline"; cat "$t_tmp/out"; fi

# Debug logging: every decision, to the file ROCK_LOG names (DD_DEBUG too).
for dbg in ROCK_DEBUG DD_DEBUG; do
	log="$t_tmp/$dbg.log"
	clean_env "$dbg=1" ROCK_LOG="$log" ROCK_KEEPALIVE_TIME=2 "$ROCK" --keepalive-only \
		"$prog" check 1 2 -1 -1 -1 >/dev/null 2>&1
	t_check "$dbg=1 logs the settings" grep -q 'mode keepalive; SO_KEEPALIVE on; TCP_KEEPIDLE 2' "$log"
	t_check "$dbg=1 logs a TCP socket seen" grep -q 'is TCP; options follow at connect or listen' "$log"
	t_check "$dbg=1 logs options set" grep -q 'set TCP_KEEPIDLE to 2' "$log"
	t_check "$dbg=1 logs a non-TCP socket skipped" grep -q 'is not TCP; left alone' "$log"
	t_check "$dbg=1 logs the program's own value kept" grep -q 'TCP_KEEPIDLE left as the program set it' "$log"
done
t_done
