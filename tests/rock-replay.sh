#!/usr/bin/env bash
# rock-replay.sh: a program's first bytes sent early (CLIENT_EARLY behind a resumption) reach rockd's backend once; the recorded flight, sent to rockd again (any of its workers), gets an answer without EARLY and no byte to the backend; under ROCK_EARLY=0 the program resumes with CLIENT_RESUME and nothing goes early. Loopback.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
PY="$top_srcdir/tests/rock-replay.py"
t_kill_on_exit
command -v python3 >/dev/null || t_skip_all "python3 not found"

be=$(free_port) port=$(free_port) tap=$(free_port) mport=$(free_port)
marker="POST /transfer?amount=100&id=$$ HTTP/1.0"
mkdir "$t_tmp/rec"
python3 "$PY" backend "$be" "$t_tmp/backend.log" &
pids+=($!)
# Two workers, each connection to either (the kernel's hash of its
# addresses and ports): a replay may land on another worker than the
# flight it copies.
printf 'workers 2\nspread connection\nmetrics 127.0.0.1:%s\nlisten 127.0.0.1:%s backend 127.0.0.1:%s\n' \
	"$mport" "$port" "$be" >"$t_tmp/rockd.conf"
"$ROCKD" -F -v -k "$t_tmp/rockd.key" -f "$t_tmp/rockd.conf" 2>"$t_tmp/rockd.log" &
rockd_pid=$!
pids+=("$rockd_pid")
rockd_started "$t_tmp/rockd.log" "$rockd_pid" ||
	t_fail_all "rockd did not start within 20 s: $(tail -n 3 "$t_tmp/rockd.log" | tr '\n' ' ')"
python3 "$PY" tap "$tap" "$port" "$t_tmp/rec" &
pids+=($!)
for _ in $(seq 100); do listening "$be" && listening "$tap" && break; sleep 0.05; done

# The program, under rock, through the tap: its first connect a full
# handshake, its second early.
log="$t_tmp/client.log"
out=$(ROCK_DEBUG=1 ROCK_LOG="$log" t_foreign timeout 60 "$ROCK" \
	python3 "$PY" client "$tap" "$marker" 2>"$log.err")
t_eq "the program's verdict" "$out" "ok"
t_eq "its second connect returned before its handshake was over" \
	"$(grep -c 'the answer to its resumption is read behind the connect$' "$log")" 1
# The recorded connection that began with the announcement and a
# CLIENT_EARLY (type 0x0a at byte 1024) and carried the marker.
flight=
for f in "$t_tmp"/rec/conn-*.bin; do
	[ "$(od -An -tx1 -j1024 -N1 "$f" 2>/dev/null | tr -d ' ')" = 0a ] && grep -qaF "$marker" "$f" && flight=$f
done
t_check "the tap recorded a CLIENT_EARLY with the program's first bytes behind it" \
	test -n "$flight"
sleep 0.3
t_eq "the backend got the first bytes once" "$(grep -aoF "$marker" "$t_tmp/backend.log" | wc -l)" 1

# The recording, sent again, four times (two workers): an answer
# (SERVER_RESUME, 0x07, 161 bytes with its TICKET) granting UDP and
# RECONNECT but not EARLY (0003), and nothing after it.
for i in 1 2 3 4; do
	[ -n "$flight" ] || break
	got=$(python3 "$PY" replay "$port" "$flight")
	t_eq "replay $i: an answer without EARLY, no echo" "$got" "161 0003 07"
done
sleep 0.5
t_eq "the backend still got the first bytes once" "$(grep -aoF "$marker" "$t_tmp/backend.log" | wc -l)" 1
t_check "rockd said why it held them back" \
	grep -q 'early bytes held back (a replayed flight)' "$t_tmp/rockd.log"
# Its metrics, summed over the workers: one admitted, four replays.
early_count() {
	curl -s "http://127.0.0.1:$mport/metrics" |
		awk -v v="verdict=\"$1\"" 'index($0, "rockd_early_flights_total{") == 1 && index($0, v) { n += $2 } END { print n + 0 }'
}
if command -v curl >/dev/null; then
	t_eq "metrics: one early flight admitted" "$(early_count admitted)" 1
	t_eq "metrics: four held back as replays" "$(early_count replay)" 4
else
	t_skipped "metrics: curl not found"
fi

# ROCK_EARLY=0: the same program's second connect resumes with
# CLIENT_RESUME (0x06) and sends its first bytes only after the answer
# proved the key: no connection of this run begins with CLIENT_EARLY.
ls "$t_tmp/rec" >"$t_tmp/rec.before"
marker0="POST /transfer?amount=200&id=$$ HTTP/1.0"
out=$(ROCK_EARLY=0 ROCK_DEBUG=1 ROCK_LOG="$t_tmp/client0.log" t_foreign timeout 60 "$ROCK" \
	python3 "$PY" client "$tap" "$marker0" 2>"$t_tmp/client0.log.err")
t_eq "ROCK_EARLY=0: the program's verdict" "$out" "ok"
t_eq "ROCK_EARLY=0: its second connect still returned at TCP up" \
	"$(grep -c 'the answer to its resumption is read behind the connect$' "$t_tmp/client0.log")" 1
types="" carrier=""
for f in "$t_tmp"/rec/conn-*.bin; do
	grep -qxF "$(basename "$f")" "$t_tmp/rec.before" && continue
	types="$types $(od -An -tx1 -j1024 -N1 "$f" | tr -d ' ')"
	grep -qaF "$marker0" "$f" && carrier=$(od -An -tx1 -j1024 -N1 "$f" | tr -d ' ')
done
t_eq "ROCK_EARLY=0: the connection that carried the first bytes began with CLIENT_RESUME" \
	"$carrier" 06
t_check "ROCK_EARLY=0: no CLIENT_EARLY recorded (types:$types)" bash -c "! grep -qw 0a <<<'$types'"
sleep 0.3
t_eq "ROCK_EARLY=0: the backend got those first bytes once" \
	"$(grep -aoF "$marker0" "$t_tmp/backend.log" | wc -l)" 1
if command -v curl >/dev/null; then
	t_eq "ROCK_EARLY=0: still one early flight admitted" "$(early_count admitted)" 1
fi
t_done
