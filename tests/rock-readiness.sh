#!/usr/bin/env bash
# rock-readiness.sh: readiness and endings a program of its own gets wrong, on loopback: waiting to write after the peer's end costs no CPU (poll, select, epoll), an edge-triggered EPOLLRDHUP reader sees the end, EPOLLEXCLUSIVE registers, a server's answer before its reset is read before the error, and a rock's end leaves a descriptor number reused behind the library alone.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
ECHOD="$top_builddir/tests/echod"
PY="$top_srcdir/tests/rock-readiness.py"
t_kill_on_exit
command -v python3 >/dev/null || t_skip_all "python3 not found"
[ -x "$ECHOD" ] || t_skip_all "tests/echod not built"

be=$(free_port) port=$(free_port) echo_port=$(free_port)
python3 "$PY" serve "$be" 2>"$t_tmp/serve.err" &
pids+=($!)
"$ECHOD" "$echo_port" &
pids+=($!)
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$be" >"$t_tmp/rockd.conf"
"$ROCKD" -F -v -f "$t_tmp/rockd.conf" 2>"$t_tmp/rockd.log" &
rockd_pid=$!
pids+=("$rockd_pid")
if ! rockd_started "$t_tmp/rockd.log" "$rockd_pid"; then
	t_bad "rockd did not start within 20 s: $(tail -n 3 "$t_tmp/rockd.log" | tr '\n' ' ')"
	t_done
fi
for _ in $(seq 100); do listening "$be" && listening "$echo_port" && break; sleep 0.05; done

# MODE ARGS...: the client under rock; its line in $got.
client() {
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$1.log" t_foreign timeout 60 "$ROCK" \
		python3 "$PY" "$@" >"$t_tmp/$1.out" 2>"$t_tmp/$1.err"
	got=$(cat "$t_tmp/$1.out")
	grep -q ': a rock$' "$t_tmp/$1.log" || got="$got (not a rock)"
}

# A FIN the peer confirmed stays on the socket: asked for POLLRDHUP on the
# program's behalf, a writer's poll returned at once, again and again.
writers=()
for m in poll-out select-out epoll-out; do
	client "$m" "$port" &
	writers+=($!)
done
wait "${writers[@]}"
for m in poll-out select-out epoll-out; do
	got=$(cat "$t_tmp/$m.out")
	grep -q ': a rock$' "$t_tmp/$m.log" || got="$got (not a rock)"
	cpu=$(sed -n 's/.*cpu \([0-9.]*\)$/\1/p' <<<"$got")
	t_check "$m: 2 s waiting to write after the peer's end, no CPU ($got)" \
		awk -v c="${cpu:-9}" 'BEGIN { exit !(c < 0.3) }'
done
client et-rdhup "$port"
t_eq "EPOLLET|EPOLLRDHUP reader: the bytes, then the end" "$got" "et-rdhup: 19 bytes, the end"
client exclusive "$port"
t_eq "EPOLLEXCLUSIVE: registered, the greeting reported" "$got" "exclusive: registered, events ['0x1']"
client answer "$port"
t_eq "a server's answer, then its reset: the answer first, then ECONNRESET" \
	"$got" "answer: 43 bytes, then ECONNRESET"
client reuse "$port" "$echo_port" "$ROCK"
t_eq "a rock's end leaves its number, reused behind the library, alone" \
	"$got" "reuse: the plain connection after the kill: b'ping2\\n'"
t_done
