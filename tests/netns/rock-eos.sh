#!/usr/bin/env bash
# rock-eos.sh: an end of file is a fact both ends agree on: a FIN forged by the router mid-stream ends a plain download short but not a rock's, and a rockd killed with -9 (its kernel's FIN) and restarted without the session gives the program ECONNRESET, never a short clean end of file.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
NFQ_FIN="$top_builddir/tests/netem/nfq-fin"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
[ -x "$NFQ_FIN" ] || t_skip_all "tests/netem/nfq-fin not built (libnetfilter-queue-dev missing)"
command -v socat >/dev/null || t_skip_all "socat not installed"
rock_netns_up
nn_on_cleanup drop_fin_rule

QUEUE=7
case $(nn_profile_base "${NN_PROFILE:-lan}") in
cellular) bytes=$((2 * 1048576)) ;;
satellite | wan | dsl) bytes=$((8 * 1048576)) ;;
*) bytes=$((32 * 1048576)) ;;
esac
"$TRAFFIC" pattern "$bytes" >"$t_tmp/pattern"

# shellcheck disable=SC2317 # run by nn_cleanup
drop_fin_rule() { nn_r iptables -w -t mangle -F FORWARD 2>/dev/null; }
# The router passes the server's segments from port 7000 through nfq-fin:
# a FIN on the first data segment past AFTER bytes. Sets fin_pid.
fin_box() {
	rm -f "$t_tmp/fin.ready"
	nn_r "$NFQ_FIN" -r "$t_tmp/fin.ready" "$QUEUE" 7000 "$1" 2>"$t_tmp/fin.log" &
	pids+=($!)
	until [ -s "$t_tmp/fin.ready" ]; do sleep 0.05; done
	fin_pid=$(cat "$t_tmp/fin.ready")
	nn_r iptables -w -t mangle -A FORWARD -p tcp --sport 7000 \
		-j NFQUEUE --queue-num "$QUEUE"
}
fin_box_off() {
	drop_fin_rule
	kill "$fin_pid" 2>/dev/null
}
# rockd's own pid in $rockd_pid (ip netns exec forks).
start_rockd() {
	rm -f "$t_tmp/rockd.pid"
	nn_s "$ROCKD" -F -v -p "$t_tmp/rockd.pid" --listen 7000 --backend 127.0.0.1:9000 \
		--listen 7001 --backend 127.0.0.1:9001 2>>"$t_tmp/rockd.log" &
	pids+=($!)
	nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 20 || t_fail_all "rockd did not start"
	rockd_pid=$(cat "$t_tmp/rockd.pid")
}
# The backends: 9000 the pattern, then its end, once per connection; 9001
# the pattern paced at 200 kB/s for a minute, for one connection.
nn_s socat -t 60 "TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork" \
	SYSTEM:"'$TRAFFIC' pattern $bytes" 2>/dev/null &
pids+=($!)
nn_s "$TRAFFIC" source 9001 200000 60 "$t_tmp/paced.sent" 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 && nn_wait_port "$NN_S" 127.0.0.1 9001 5 ||
	t_skip_all "the backends did not start"
start_rockd
# KIND OUT: download through rockd, plain or under rock, within 2 minutes;
# its exit status in $rc (124: still running).
sink() {
	local pid
	if [ "$1" = rock ]; then
		ROCK_DEBUG=1 ROCK_LOG="$t_tmp/rock.log" t_foreign nn_c "$ROCK" \
			"$TRAFFIC" sink "$NN_S_ADDR" 7000 "$2" >"$2.out" 2>&1 &
	else
		nn_c "$TRAFFIC" sink "$NN_S_ADDR" 7000 "$2" >"$2.out" 2>&1 &
	fi
	pid=$! pids+=($!)
	rc=124
	if wait_pid "$pid" 120; then rc=$waited; fi
}
# FILE: its bytes are the pattern's first bytes (nothing out of order).
prefix_ok() { cmp -s -n "$(size "$1")" "$1" "$t_tmp/pattern"; }

# ---- 1. a forged FIN: plain TCP believes it, a rock does not
fin_box 1000000
sink plain "$t_tmp/plain.got"
t_eq "plain: the download ends cleanly (exit status)" "$rc" 0
t_check "plain: the forged FIN ended it short ($(size "$t_tmp/plain.got") of $bytes bytes)" \
	test "$(size "$t_tmp/plain.got")" -lt "$bytes"
t_check "the router set a FIN: $(cat "$t_tmp/fin.log")" grep -q '^fin: set after' "$t_tmp/fin.log"
fin_box_off
fin_box 1000000
sink rock "$t_tmp/rock.got"
t_eq "rock: the download exits 0" "$rc" 0
t_check "the router set a FIN again: $(cat "$t_tmp/fin.log")" grep -q '^fin: set after' "$t_tmp/fin.log"
t_check "rock: was a rock" grep -q ': a rock$' "$t_tmp/rock.log"
if cmp -s "$t_tmp/rock.got" "$t_tmp/pattern"; then
	t_ok "rock: all $bytes bytes exact through the forged FIN (sha256 $(sha256sum <"$t_tmp/rock.got" | cut -c1-16))"
else
	t_bad "rock: $(size "$t_tmp/rock.got") of $bytes bytes: $(cmp "$t_tmp/rock.got" "$t_tmp/pattern" 2>&1 | head -1)"
fi
# Its kernel read the FIN (or reset what came after it, the sender never
# having sent one): either way a failure of the data connection, never an
# end of the stream.
t_check "rock: the forged FIN made a suspension: $(grep -o 'CONNECTED -> SUSPENDED (.*' "$t_tmp/rock.log" | head -1)" \
	grep -q 'CONNECTED -> SUSPENDED' "$t_tmp/rock.log"
fin_box_off

# ---- 2. rockd killed mid-stream (its kernel sends the FIN) and started
# again without the session: an error, never a short clean end of file.
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/killed.log" t_foreign nn_c "$ROCK" \
	"$TRAFFIC" sink "$NN_S_ADDR" 7001 "$t_tmp/killed.got" >"$t_tmp/killed.out" 2>"$t_tmp/killed.err" &
sink_pid=$! pids+=($!)
until [ "$(size "$t_tmp/killed.got")" -gt 100000 ] || ! kill -0 "$sink_pid" 2>/dev/null; do sleep 0.05; done
kill -KILL "$rockd_pid"
nap 4
start_rockd
if wait_pid "$sink_pid" 60; then
	t_eq "killed rockd: the program's read fails (exit status)" "$waited" 1
	t_check "killed rockd: with ECONNRESET ($(cat "$t_tmp/killed.err"))" \
		grep -q 'Connection reset by peer' "$t_tmp/killed.err"
else
	t_bad "killed rockd: the program still waits 60 s after rockd came back"
fi
t_check "killed rockd: what it got ($(size "$t_tmp/killed.got") bytes) is the stream's start" \
	prefix_ok "$t_tmp/killed.got"
t_check "killed rockd: the rock was told its session is gone" \
	grep -q 'no such session' "$t_tmp/killed.log"
t_done
