#!/usr/bin/env bash
# rock-early.sh: a program's second connect to a rockd it met returns when TCP is up, the resumption's answer read behind it; the connection used at once every way a program uses one (blocking, non-blocking, poll, select, epoll, its names, its options, SHUT_WR, fork, stdio, a close at once), and what a rockd restarted or gone between the two connects gives. Loopback.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
ECHOD="$top_builddir/tests/echod"
PY="$top_srcdir/tests/rock-early.py"
t_kill_on_exit
command -v python3 >/dev/null || t_skip_all "python3 not found"
[ -x "$ECHOD" ] || t_skip_all "tests/echod not built"

be=$(free_port) port=$(free_port)
"$ECHOD" "$be" &
echod_pid=$!
pids+=("$echod_pid")
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$be" >"$t_tmp/rockd.conf"

start_rockd() {	# LOG
	"$ROCKD" -F -v -k "$t_tmp/rockd.key" -f "$t_tmp/rockd.conf" 2>"$1" &
	rockd_pid=$!
	pids+=("$rockd_pid")
	rockd_started "$1" "$rockd_pid" || t_fail_all "rockd did not start within 20 s: $(tail -n 3 "$1" | tr '\n' ' ')"
}
start_rockd "$t_tmp/rockd.log"
for _ in $(seq 100); do listening "$be" && break; sleep 0.05; done

# MODE [PAUSE]: the program under rock; $out, $log. Its first connect
# starts its engine (the probe, or the file the user's processes share);
# its second finds the announcement and a ticket in that engine.
client() {
	local m=$1
	shift
	log="$t_tmp/$m${1:+.again}.log"
	out=$(ROCK_DEBUG=1 ROCK_LOG="$log" t_foreign timeout 60 "$ROCK" \
		python3 "$PY" "$m" "$port" "$@" 2>"$log.err")
}
early() { grep -c 'the answer to its resumption is read behind the connect$' "$1"; }
rocks() { grep -c ': a rock$' "$1"; }

for m in blocking nonblock-write poll-out select epoll names sockopt shut-wr fork stdio zero-write close; do
	client "$m"
	t_eq "$m: the program's verdict" "$out" "ok $m"
	t_eq "$m: the second connect returned before its handshake was over" "$(early "$log")" 1
	# A rock closed before it was in place is released, never installed
	# (or it was in place first: the close races the answer).
	if [ "$m" = close ]; then
		t_check "$m: the first rock installed, the second at most" \
			grep -qx '[12]' <<<"$(rocks "$log")"
	else
		t_eq "$m: rocks installed under the program's descriptor" "$(rocks "$log")" 2
	fi
done
sleep 0.5
# A close at once, as a connect-only client's, is a rock closed cleanly:
# its FINISHED went, rockd counted no handshake as failed.
t_eq "rockd: no rock dropped for a missing FINISHED" \
	"$(grep -c 'is dropped before any byte reached its owner' "$t_tmp/rockd.log")" 0

# rockd restarted between the two connects (a new announcement): the early
# resumption is refused as stale, the connect's handshake runs again in
# full behind it, and the program's bytes go exact.
( while [ ! -e "$t_tmp/restart.ready" ]; do sleep 0.02; done
  kill -TERM "$rockd_pid"
  # Its ports free (TCP and the control channel's UDP): it has gone.
  for _ in $(seq 400); do
	listening "$port" || ss -Huln "sport = :$port" | grep -q . || break
	sleep 0.05
  done
  "$ROCKD" -F -v -k "$t_tmp/rockd.key" -f "$t_tmp/rockd.conf" 2>"$t_tmp/rockd2.log" &
  echo $! >"$t_tmp/rockd2.pid"
  rockd_started "$t_tmp/rockd2.log" "$!"
  touch "$t_tmp/restart.go" ) &
pids+=($!)
client blocking "$t_tmp/restart"
wait "${pids[-1]}"
rockd_pid=$(cat "$t_tmp/rockd2.pid")
pids+=("$rockd_pid")
t_eq "rockd restarted between: the program's verdict" "$out" "ok blocking"
t_eq "rockd restarted between: the connect returned early" "$(early "$log")" 1
t_check "rockd restarted between: the early resumption failed and the full path ran" \
	grep -q 'the early resumption failed' "$log"
t_eq "rockd restarted between: both connects are rocks" "$(rocks "$log")" 2

# The backend gone between the two: connect() returned, rockd refuses the
# resumption (signed), the full path is refused too, the plain connection
# through rockd is reset: the program's next call fails, never reads an
# end of file.
( while [ ! -e "$t_tmp/backend.ready" ]; do sleep 0.02; done
  kill -KILL "$echod_pid"; wait "$echod_pid" 2>/dev/null
  touch "$t_tmp/backend.go" ) &
pids+=($!)
client failed "$t_tmp/backend"
t_check "backend gone between: the program's next call failed ($out)" \
	grep -Eqx 'error (ECONNREFUSED|ECONNRESET|EPIPE)' <<<"${out%%$'\n'*}"
t_eq "backend gone between: the program's verdict" "${out##*$'\n'}" "ok failed"
t_eq "backend gone between: the connect returned early" "$(early "$log")" 1
"$ECHOD" "$be" &
pids+=($!)
for _ in $(seq 100); do listening "$be" && break; sleep 0.05; done

# rockd gone between the two (its port closed): the connect is refused,
# as TCP's.
( while [ ! -e "$t_tmp/gone.ready" ]; do sleep 0.02; done
  kill -KILL "$rockd_pid"; wait "$rockd_pid" 2>/dev/null
  # Its workers die after it (PR_SET_PDEATHSIG): until their listeners
  # are gone, a connect can still land on one (seen under the sanitizer).
  for _ in $(seq 400); do listening "$port" || break; sleep 0.05; done
  touch "$t_tmp/gone.go" ) &
pids+=($!)
client refused "$t_tmp/gone"
t_eq "rockd gone between: the connect is refused" "$out" "ok refused"
t_done
