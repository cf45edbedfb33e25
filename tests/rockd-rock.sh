#!/usr/bin/env bash
# rockd-rock.sh: rockd's rock sessions on loopback: backend refused, backend dies, client vanishes past the suspend timeout; a client socket the program bound stays plain.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
ROCKCAT="$top_builddir/tools/rockcat"
t_kill_on_exit
command -v python3 >/dev/null || t_skip_all "python3 not found"
command -v socat >/dev/null || t_skip_all "socat not found"


# start_rockd LOG CONF: rockd -F -v on a config file; sets rockd_pid.
start_rockd() {
	"$ROCKD" -F -v -f "$2" 2>"$1" &
	rockd_pid=$!
	pids+=("$rockd_pid")
	for _ in $(seq 100); do rockd_up "$1" && return 0; sleep 0.05; done
	return 1
}

# wait_log LOG PATTERN SECONDS
wait_log() {
	local i
	for i in $(seq $(($3 * 20))); do grep -q -- "$2" "$1" && return 0; sleep 0.05; done
	return 1
}

# --- 1. backend refuses: the rock client is refused like a plain connect -----
port=$(free_port) dead=$(free_port)
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$dead" >"$t_tmp/1.conf"
start_rockd "$t_tmp/1.log" "$t_tmp/1.conf" || t_fail_all "rockd did not start"
echo hi | timeout 10 "$ROCKCAT" -r 127.0.0.1 "$port" >"$t_tmp/1.out" 2>"$t_tmp/1.err"
t_eq "refused backend: rockcat exits 1" $? 1
t_check "refused backend: the client is told it was refused" \
	grep -q ": peer refused the connection" "$t_tmp/1.err"
t_check "refused backend: rockd logs why" \
	grep -q "rock: backend 127.0.0.1:$dead: Connection refused; refusing the client" "$t_tmp/1.log"
t_eq "refused backend: no rock kept" "$(grep -c 'client connected, backend' "$t_tmp/1.log")" 0
kill "$rockd_pid"

# --- 2. backend dies mid-session: the client's rock is reset ------------------
port=$(free_port) be=$(free_port)
python3 - "$be" <<'PY' &
import socket, struct, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(1)
c, _ = l.accept(); c.sendall(b"hello\n"); time.sleep(1)
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close()
PY
pids+=($!)
# python3 can take a while to start (a pyenv shim, a loaded machine).
for _ in $(seq 200); do listening "$be" && break; sleep 0.05; done
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$be" >"$t_tmp/2.conf"
start_rockd "$t_tmp/2.log" "$t_tmp/2.conf" || t_bad "rockd starts"
sleep 0.2
(sleep 5 | timeout 10 "$ROCKCAT" -r 127.0.0.1 "$port" >"$t_tmp/2.out" 2>"$t_tmp/2.err"; echo "rc=$?" >>"$t_tmp/2.err")
t_eq "backend dies: the client got what the backend sent" "$(cat "$t_tmp/2.out")" "hello"
t_check "backend dies: rockcat exits 1" grep -q "^rc=1$" "$t_tmp/2.err"
t_check "backend dies: the client is told its connection is gone" \
	grep -q "connection lost: peer no longer knows the session" "$t_tmp/2.err"
t_check "backend dies: rockd logs why" \
	grep -q "backend 127.0.0.1:$be failed: Connection reset by peer; resetting the client" "$t_tmp/2.log"
kill "$rockd_pid"

# --- 3. a client that vanishes is dropped after the suspend timeout, and the
#        backend connection with it ---------------------------------------------
port=$(free_port) be=$(free_port)
socat -u TCP-LISTEN:"$be",bind=127.0.0.1,reuseaddr OPEN:"$t_tmp/3.backend",creat 2>/dev/null &
backend_pid=$!
pids+=("$backend_pid")
for _ in $(seq 200); do listening "$be" && break; sleep 0.05; done
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\nsuspend-timeout 2\n' "$port" "$be" >"$t_tmp/3.conf"
start_rockd "$t_tmp/3.log" "$t_tmp/3.conf" || t_bad "rockd starts"
sleep 0.2
(echo "before vanishing"; sleep 30) | "$ROCKCAT" -r 127.0.0.1 "$port" >/dev/null 2>&1 &
cat_pid=$!
pids+=("$cat_pid")
wait_log "$t_tmp/3.log" "client connected, backend" 5
sleep 0.5
pkill -KILL -P "$cat_pid" rockcat 2>/dev/null; kill -KILL "$cat_pid" 2>/dev/null
t0=$(date +%s%3N)
if wait_log "$t_tmp/3.log" "CONNECTED -> SUSPENDED" 10; then
	t_ok "vanished client: its rock is suspended"
else
	t_bad "vanished client: its rock is suspended"
fi
if wait_log "$t_tmp/3.log" "ended (suspended past the suspend timeout); closing its backend connection" 10; then
	t_ok "vanished client: dropped after the suspend timeout ($(( $(date +%s%3N) - t0 )) ms after it vanished)"
else
	t_bad "vanished client: dropped after the suspend timeout"
fi
for _ in $(seq 100); do kill -0 "$backend_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$backend_pid" 2>/dev/null; then
	t_bad "vanished client: the backend connection is closed"
else
	t_ok "vanished client: the backend connection is closed"
fi
t_eq "vanished client: the backend got the bytes sent before" "$(cat "$t_tmp/3.backend")" "before vanishing"
kill "$rockd_pid"

# --- 4. a socket the program bound keeps its address: plain, not a rock ------
# (the shim's bind() notes it; a socket it did not bind is a rock).
port=$(free_port) be=$(free_port) own=$(free_port)
socat "TCP4-LISTEN:$be,bind=127.0.0.1,reuseaddr,fork" EXEC:cat 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do listening "$be" && break; sleep 0.05; done
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$be" >"$t_tmp/4.conf"
start_rockd "$t_tmp/4.log" "$t_tmp/4.conf" || t_bad "rockd starts"
# BIND: the local port the client binds (0: none); prints its local port
# and the echo.
bound_client() {
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/4.$1.log" timeout 20 "$ROCK" python3 - "$port" "$1" <<'PY'
import socket, sys
s = socket.socket()
if int(sys.argv[2]):
    s.bind(("127.0.0.1", int(sys.argv[2])))
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"ping\n")
got = b""
while not got.endswith(b"\n"):
    got += s.recv(100)
print(s.getsockname()[1], got.decode().strip())
PY
}
t_eq "bound client: its own port, the echo" "$(bound_client "$own")" "$own ping"
if grep -q ': a rock$' "$t_tmp/4.$own.log"; then
	t_bad "bound client: not a rock"
else
	t_ok "bound client: not a rock"
fi
bound_client 0 >"$t_tmp/4.out"
t_eq "unbound client: the echo" "$(awk '{ print $2 }' "$t_tmp/4.out")" "ping"
t_check "unbound client: a rock" grep -q ': a rock$' "$t_tmp/4.0.log"
kill "$rockd_pid"
t_done
