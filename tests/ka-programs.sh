#!/usr/bin/env bash
# ka-programs.sh: keepalive options on the sockets of real programs (java, python3, socat, curl) under rock --keepalive-only.
# shellcheck source-path=SCRIPTDIR
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

inspect="$top_builddir/tests/sockinspect"
HOLD=20 # seconds a client holds its connection at most; killed as soon as inspected
CLEAN=(env -u ROCK_MODE -u ROCK_KEEPALIVE_TIME -u ROCK_KEEPALIVE_INTVL
	-u ROCK_KEEPALIVE_PROBES -u ROCK_USER_TIMEOUT_MS -u ROCK_DEBUG -u ROCK_LOG
	-u DD_DEBUG -u DD_TCP_KEEPALIVE_TIME -u DD_TCP_KEEPALIVE_INTVL
	-u DD_TCP_KEEPALIVE_PROBES -u DD_USE_KEEPALIVE -u DD_EVAL_ENVIRONMENT_ONCE)
ROCKENV=(ROCK_KEEPALIVE_TIME=31 ROCK_KEEPALIVE_INTVL=7 ROCK_KEEPALIVE_PROBES=5
	ROCK_USER_TIMEOUT_MS=12000)
WANT="keepalive=1 idle=31 intvl=7 cnt=5 user_timeout=12000"

# Every process started here, killed with its descendants on any exit.
started=()
# tree PID: PID and all its descendants, one a line (from /proc, no procps needed).
tree() {
	local -A parent=()
	local s line rest pid
	for s in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$s" || continue
		pid=${s#/proc/}
		pid=${pid%/stat}
		rest=${line##*) }
		rest=${rest#* }
		parent[$pid]=${rest%% *}
	done
	local -a queue=("$1")
	local i=0
	while [ "$i" -lt "${#queue[@]}" ]; do
		echo "${queue[$i]}"
		for pid in "${!parent[@]}"; do
			[ "${parent[$pid]}" = "${queue[$i]}" ] && queue+=("$pid")
		done
		i=$((i + 1))
	done
}
# reap PID: wait for our child PID and forget it (its pid may be reused after).
reap() {
	local -a keep=()
	local p
	wait "$1" 2>/dev/null
	for p in "${started[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	started=("${keep[@]}")
}
# kill_tree PID: SIGTERM to our child PID and its descendants (SIGKILL after 5 s), reaped.
kill_tree() {
	local -a all
	local i line
	mapfile -t all < <(tree "$1")
	kill -TERM "${all[@]}" 2>/dev/null
	for i in $(seq 50); do
		read -r line 2>/dev/null </proc/"$1"/stat || break
		line=${line##*) }
		[ "${line%% *}" = Z ] && break
		[ "$i" -eq 50 ] && kill -KILL "${all[@]}" 2>/dev/null
		sleep 0.1
	done
	reap "$1"
}
# shellcheck disable=SC2317 # run by the EXIT trap
on_exit() {
	local rc=$? p
	for p in "${started[@]}"; do kill_tree "$p"; done
	(exit "$rc")
	t_finish
}
trap on_exit EXIT

[ -x "$inspect" ] || {
	t_bad "no $inspect (built by make check)"
	t_done
}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || t_skip_all "no python3 (needed for the listener)"

# snapshot PID FILE: sockinspect every process of PID's tree into FILE.
# Returns 1 if PID is gone; exits 77 if pidfd_getfd is not allowed here.
snapshot() {
	local p rc
	: >"$2"
	kill -0 "$1" 2>/dev/null || return 1
	for p in $(tree "$1"); do
		"$inspect" "$p" >>"$2" 2>/dev/null
		rc=$?
		if [ "$rc" -eq 77 ]; then t_skip_all "$(grep '^SKIP' "$2")"; fi
	done
	return 0
}

# wait_state PID FILE STATE [N]: poll (10 s at most) until PID's tree has N
# (default 1) TCP sockets in STATE; the last snapshot is left in FILE.
wait_state() {
	local i n
	for i in $(seq 100); do
		snapshot "$1" "$2" || return 1
		n=$(grep -c " state=$3 " "$2")
		[ "$n" -ge "${4:-1}" ] && return 0
		[ "$i" -eq 100 ] || sleep 0.1
	done
	return 1
}

# expect NAME FILE STATE FAMILY VALUES: every STATE socket in FILE (at least
# one) is exactly "family=FAMILY state=STATE VALUES" (FAMILY, VALUES: EREs).
expect() {
	local name=$1 file=$2 state=$3 family=$4 values=$5
	if grep -q " state=$state " "$file" &&
		! grep " state=$state " "$file" |
		grep -Evq "^fd=[0-9]+ family=($family) state=$state $values\$"; then
		t_ok "$name: $(grep -m1 " state=$state " "$file" | cut -d' ' -f2-)"
	else
		t_bad "$name: want family=$family state=$state $values"
		sed 's/^/    /' "$file"
	fi
}

# wait_output FILE TEXT: poll (10 s at most) until FILE has the line TEXT.
wait_output() {
	local i
	for i in $(seq 100); do
		grep -qxF "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

# The server: echoes, but answers "GET " requests after a delay (curl's case).
cat >"$t_tmp/listener.py" <<'EOF'
import os, socket, sys, threading, time
portfile, delay = sys.argv[1], float(sys.argv[2])
def serve(c):
    try:
        with c:
            data = c.recv(4096)
            if data.startswith(b"GET "):
                while b"\r\n\r\n" not in data:
                    more = c.recv(4096)
                    if not more:
                        return
                    data += more
                time.sleep(delay)
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
                return
            while data:
                c.sendall(data)
                data = c.recv(4096)
    except OSError:
        pass
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 0))
l.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % l.getsockname()[1])
os.rename(portfile + ".tmp", portfile)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
# The client: connects, sends a line, prints the echo, holds the connection.
cat >"$t_tmp/client.py" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"hello from python\n")
print("echo: " + s.recv(100).decode().strip(), flush=True)
time.sleep(float(sys.argv[2]))
EOF

"$PY" "$t_tmp/listener.py" "$t_tmp/port" 2 >"$t_tmp/listener.err" 2>&1 </dev/null &
listener=$!
started+=("$listener")
for _ in $(seq 50); do [ -s "$t_tmp/port" ] && break; sleep 0.1; done
[ -s "$t_tmp/port" ] || {
	t_bad "listener did not start"
	cat "$t_tmp/listener.err"
	t_done
}
port=$(cat "$t_tmp/port")
# Can we look into another process's sockets at all?
"$inspect" "$listener" >"$t_tmp/probe" 2>&1
case $? in
0) ;;
77) t_skip_all "$(cat "$t_tmp/probe")" ;;
*)
	t_bad "sockinspect on the listener"
	cat "$t_tmp/probe"
	t_done
	;;
esac

# client NAME STATE FAMILY VALUES ECHO -- COMMAND...: run COMMAND in the
# background, wait for a STATE socket, check it and, if ECHO is not empty,
# that COMMAND printed that line; then kill it.
client() {
	local name=$1 state=$2 family=$3 values=$4 echo=$5 pid
	shift 6
	"$@" >"$t_tmp/$name.out" 2>"$t_tmp/$name.err" </dev/null &
	pid=$!
	started+=("$pid")
	if wait_state "$pid" "$t_tmp/$name.socks" "$state"; then
		expect "$name" "$t_tmp/$name.socks" "$state" "$family" "$values"
		if [ -n "$echo" ]; then
			if wait_output "$t_tmp/$name.out" "$echo"; then t_ok "$name: works under rock"; else
				t_bad "$name: no '$echo' in its output"
				sed 's/^/    /' "$t_tmp/$name.out" "$t_tmp/$name.err"
			fi
		fi
	else
		t_bad "$name: no $state TCP socket appeared"
		sed 's/^/    /' "$t_tmp/$name.out" "$t_tmp/$name.err"
	fi
	kill_tree "$pid"
}

# --- java: libdontdie's motivating case --------------------------------
if ! command -v java >/dev/null; then
	t_skipped "java: no java"
elif [ -n "${ROCK_SAN_PRELOAD:-}" ]; then
	t_skipped "java: librock.so is built with ASan; the JVM cannot run with the sanitizer preloaded"
else
	cat >"$t_tmp/EchoClient.java" <<'EOF'
import java.io.*;
import java.net.*;
import java.nio.charset.StandardCharsets;

public class EchoClient {
    public static void main(String[] args) throws Exception {
        try (Socket s = new Socket(args[0], Integer.parseInt(args[1]))) {
            PrintWriter out = new PrintWriter(new OutputStreamWriter(s.getOutputStream(), StandardCharsets.US_ASCII), true);
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII));
            out.println("hello from java");
            System.out.println("echo: " + in.readLine());
            System.out.flush();
            Thread.sleep(Long.parseLong(args[2]) * 1000);
        }
    }
}
EOF
	# Java opens AF_INET6 sockets even to 127.0.0.1 unless IPv6 is unavailable.
	client java connected 'inet|inet6' "$WANT" "echo: hello from java" -- \
		"${CLEAN[@]}" "${ROCKENV[@]}" "$ROCK" --keepalive-only \
		java "$t_tmp/EchoClient.java" 127.0.0.1 "$port" "$HOLD"
fi

# --- python3 -------------------------------------------------------------
client python3 connected inet "$WANT" "echo: hello from python" -- \
	"${CLEAN[@]}" "${ROCKENV[@]}" "$ROCK" --keepalive-only "$PY" "$t_tmp/client.py" "$port" "$HOLD"
client "python3 with libdontdie's DD_* names" connected inet \
	"keepalive=1 idle=41 intvl=9 cnt=4 user_timeout=0" "echo: hello from python" -- \
	"${CLEAN[@]}" DD_TCP_KEEPALIVE_TIME=41 DD_TCP_KEEPALIVE_INTVL=9 DD_TCP_KEEPALIVE_PROBES=4 \
	"$ROCK" --keepalive-only "$PY" "$t_tmp/client.py" "$port" "$HOLD"
# Control: the same program and environment without rock is untouched, and
# the check above would have failed on it.
client "control: python3 without rock" connected inet \
	"keepalive=0 idle=[0-9]+ intvl=[0-9]+ cnt=[0-9]+ user_timeout=0" "" -- \
	"${CLEAN[@]}" "${ROCKENV[@]}" "$PY" "$t_tmp/client.py" "$port" "$HOLD"
if grep -q " state=connected " "$t_tmp/control: python3 without rock.socks" &&
	! grep " state=connected " "$t_tmp/control: python3 without rock.socks" |
	grep -Eq " $WANT\$"; then
	t_ok "control: the rock expectation fails without rock"
else
	t_bad "control: the rock expectation holds without rock"
fi

# --- socat ---------------------------------------------------------------
if ! command -v socat >/dev/null; then
	t_skipped "socat client: no socat"
	t_skipped "socat server: no socat"
else
	client "socat client" connected inet "$WANT" "" -- \
		"${CLEAN[@]}" "${ROCKENV[@]}" "$ROCK" --keepalive-only \
		socat -u EXEC:"sleep $HOLD" "TCP:127.0.0.1:$port"

	# Server side: the listener and the socket it accepts (in a fork child).
	# The port is picked free first; retried if someone takes it meanwhile.
	sp=
	for _ in 1 2 3; do
		sport=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		"${CLEAN[@]}" "${ROCKENV[@]}" "$ROCK" --keepalive-only \
			socat "TCP-LISTEN:$sport,bind=127.0.0.1,reuseaddr,fork" EXEC:cat \
			>"$t_tmp/socat-server.out" 2>"$t_tmp/socat-server.err" </dev/null &
		sp=$!
		started+=("$sp")
		wait_state "$sp" "$t_tmp/socat-server.socks" listen && break
		kill_tree "$sp"
		sp=
	done
	if [ -z "$sp" ]; then
		t_bad "socat server: no listening socket"
		sed 's/^/    /' "$t_tmp/socat-server.err"
	else
		expect "socat server: listener" "$t_tmp/socat-server.socks" listen inet "$WANT"
		# A plain client, not under rock.
		"${CLEAN[@]}" "$PY" "$t_tmp/client.py" "$sport" "$HOLD" \
			>"$t_tmp/socat-peer.out" 2>"$t_tmp/socat-peer.err" </dev/null &
		cp=$!
		started+=("$cp")
		if wait_state "$sp" "$t_tmp/socat-server.socks" connected; then
			expect "socat server: accepted socket" "$t_tmp/socat-server.socks" connected inet "$WANT"
			expect "socat server: listener still" "$t_tmp/socat-server.socks" listen inet "$WANT"
			t_check "socat server: echoes" wait_output "$t_tmp/socat-peer.out" "echo: hello from python"
			snapshot "$cp" "$t_tmp/socat-peer.socks"
			expect "socat server: its plain peer is untouched" "$t_tmp/socat-peer.socks" \
				connected inet "keepalive=0 idle=[0-9]+ intvl=[0-9]+ cnt=[0-9]+ user_timeout=0"
		else
			t_bad "socat server: no accepted socket"
			sed 's/^/    /' "$t_tmp/socat-server.err" "$t_tmp/socat-peer.err"
		fi
		kill_tree "$cp"
		kill_tree "$sp"
	fi
fi

# --- curl ----------------------------------------------------------------
# The listener answers after 2 s; curl must finish normally with "ok".
# curl turns keepalive on itself (idle and interval 60 s unless told), and
# rock keeps what a program set: --no-keepalive leaves everything to rock.
if ! command -v curl >/dev/null; then
	t_skipped "curl: no curl"
elif [ -n "${ROCK_SAN_PRELOAD:-}" ]; then
	# Seen here: curl hangs in setlocale() with libasan preloaded, with or
	# without librock, so a sanitizer build cannot run it.
	t_skipped "curl: it deadlocks with the ASan runtime preloaded (librock or not)"
else
	for opt in --no-keepalive "--keepalive-time 100"; do
		case $opt in
		--no-keepalive) name="curl --no-keepalive" values=$WANT ;;
		# curl may set TCP_KEEPCNT itself too (newer versions).
		*) name="curl --keepalive-time 100: curl's values kept" \
			values="keepalive=1 idle=100 intvl=100 cnt=[0-9]+ user_timeout=12000" ;;
		esac
		# shellcheck disable=SC2086 # $opt is one or two words
		"${CLEAN[@]}" "${ROCKENV[@]}" "$ROCK" --keepalive-only \
			curl -sS --max-time 15 $opt "http://127.0.0.1:$port/" \
			>"$t_tmp/$name.out" 2>"$t_tmp/$name.err" </dev/null &
		cu=$!
		started+=("$cu")
		if wait_state "$cu" "$t_tmp/$name.socks" connected; then
			expect "$name" "$t_tmp/$name.socks" connected inet "$values"
		else
			t_bad "$name: no connected TCP socket appeared"
		fi
		wait "$cu"
		t_eq "$name: exit status" "$?" 0
		reap "$cu"
		t_eq "$name: body" "$(cat "$t_tmp/$name.out")" ok
	done
fi
t_done
