#!/usr/bin/env bash
# rockd-plain.sh: rockd's -t checks, and its plain TCP relay, SIGTERM and SIGHUP on loopback.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
[ -x "$ROCKD" ] || t_skip_all "$ROCKD not built"
command -v python3 >/dev/null || t_skip_all "python3 not found"

# Every process started here is killed on every way out.
pids=()
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	local rc=$? p
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	(exit "$rc")
	t_finish
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# The peers: backends that bind port 0 and publish it, and clients.
cat >"$t_tmp/peer.py" <<'EOF'
import os, socket, sys, threading, time

HOST = '127.0.0.1'

TCP_CLOSE = 7  # tcpi_state of a connection a reset ended (linux/tcp_states.h)

def publish(path, text):
    with open(path + '.tmp', 'w') as f:
        f.write(text)
    os.rename(path + '.tmp', path)

def wait_file(path, limit=20):
    end = time.time() + limit
    while not os.path.exists(path):
        if time.time() > end:
            raise TimeoutError(path)
        time.sleep(0.02)

def listener(portfile):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((HOST, 0))
    s.listen(512)
    publish(portfile, '%d\n' % s.getsockname()[1])
    return s

def accept_one(portfile):
    s = listener(portfile)
    s.settimeout(30)
    c, _ = s.accept()
    s.close()
    c.settimeout(30)
    return c

def connect(port):
    return socket.create_connection((HOST, int(port)), timeout=20)

def background(fn, *args):
    box = {}
    def run():
        try:
            box['result'] = fn(*args)
        except Exception as e:
            box['error'] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box

def finish(t, box):
    t.join()
    if 'error' in box:
        raise box['error']
    return box.get('result')

def read(path):
    with open(path, 'rb') as f:
        return f.read()

def write(path, data):
    with open(path, 'wb') as f:
        f.write(data)

def send_close(c, data):
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)

def recv_all(c):
    buf = bytearray()
    while True:
        b = c.recv(1 << 16)
        if not b:
            return bytes(buf)
        buf += b

def recv_n(c, n):
    buf = bytearray()
    while len(buf) < n:
        b = c.recv(n - len(buf))
        if not b:
            break
        buf += b
    return bytes(buf)

def duplex(c, send, recv):
    t = background(send_close, c, read(send))
    write(recv, recv_all(c))
    finish(*t)
    c.close()

def echo_once(port, size, barrier=None):
    payload = os.urandom(size)
    c = connect(port)
    if barrier is not None:
        barrier.wait()
    t = background(send_close, c, payload)
    got = recv_all(c)
    finish(*t)
    c.close()
    return got == payload

def echo_conn(c):
    with c:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            c.sendall(b)
        c.shutdown(socket.SHUT_WR)

def cmd_ports(n):
    socks = [socket.socket() for _ in range(int(n))]
    for s in socks:
        s.bind((HOST, 0))
    print(' '.join(str(s.getsockname()[1]) for s in socks))

def cmd_echo_server(portfile):
    s = listener(portfile)
    while True:
        c, _ = s.accept()
        threading.Thread(target=echo_conn, args=(c,), daemon=True).start()

def cmd_duplex_server(portfile, send, recv):
    duplex(accept_one(portfile), send, recv)

def cmd_duplex_client(port, send, recv):
    duplex(connect(port), send, recv)

def cmd_half_server(portfile, reply, seen):
    c = accept_one(portfile)
    write(seen, recv_all(c))
    time.sleep(0.1)
    c.sendall(read(reply))
    c.close()

def cmd_half_client(port, request, out):
    c = connect(port)
    send_close(c, read(request))
    write(out, recv_all(c))
    c.close()

def cmd_banner_server(portfile, banner):
    c = accept_one(portfile)
    c.sendall(read(banner))
    recv_all(c)
    c.close()

# Read n bytes, then anything arriving in the next 0.3 s.
def cmd_read_n(port, n, out):
    c = connect(port)
    got = recv_n(c, int(n))
    c.settimeout(0.3)
    try:
        got += c.recv(1 << 16)
    except socket.timeout:
        pass
    write(out, got)
    c.close()

def cmd_probe(port):
    try:
        c = connect(port)
        c.settimeout(5)
        print('data' if c.recv(1) else 'eof')
    except ConnectionRefusedError:
        print('refused')
    except ConnectionResetError:
        # an accept then a reset, during connect or after it
        print('reset')
    except socket.timeout:
        print('timeout')

def cmd_echo(port, size):
    try:
        print('ok' if echo_once(port, int(size)) else 'mismatch')
    except ConnectionRefusedError:
        print('refused')

def cmd_many(port, n, size):
    n = int(n)
    barrier = threading.Barrier(n, timeout=20)
    jobs = [background(echo_once, port, int(size), barrier) for _ in range(n)]
    ok = 0
    for job in jobs:
        try:
            ok += 1 if finish(*job) else 0
        except Exception as e:
            print(repr(e), file=sys.stderr)
    print('%d of %d exact' % (ok, n))

# Round k (from 2 on after DIR/go.k appears): 100000 bytes echoed on one connection.
def cmd_session(port, dir, tag, rounds):
    c = connect(port)
    for k in range(1, int(rounds) + 1):
        if k > 1:
            wait_file('%s/go.%d' % (dir, k))
        payload = os.urandom(100000)
        try:
            t = background(c.sendall, payload)
            got = recv_n(c, len(payload))
            finish(*t)
            res = 'ok' if got == payload else 'mismatch (%d bytes)' % len(got)
        except Exception as e:
            res = repr(e)
        publish('%s/%s.%d' % (dir, tag, k), res + '\n')
    c.close()

# Send DATA until blocked; FULL appears once the sending has stalled, EOF
# says how the read side ended.
def cmd_flood_server(portfile, data, full, eof):
    c = accept_one(portfile)
    sent = [0]
    def flood():
        buf = read(data)
        for off in range(0, len(buf), 1 << 16):
            c.sendall(buf[off:off + (1 << 16)])
            sent[0] = off + (1 << 16)
    def reader():
        try:
            n = len(recv_all(c))
        except ConnectionResetError:
            publish(eof, 'reset\n')
            return
        # A reset's error goes to one call: the flood's send may have
        # taken it, and this read then sees 0. The state tells: a FIN
        # leaves CLOSE_WAIT, a reset CLOSE.
        state = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        publish(eof, 'reset\n' if state == TCP_CLOSE else 'eof after %d bytes\n' % n)
    background(flood)
    r = background(reader)
    last = -1
    while sent[0] != last or sent[0] < (1 << 20):
        last = sent[0]
        time.sleep(0.3)
    publish(full, '%d\n' % sent[0])
    finish(*r)

def cmd_stall_client(port, first, started, go, out):
    c = connect(port)
    got = recv_n(c, int(first))
    publish(started, '\n')
    wait_file(go)
    try:
        got += recv_all(c)
        print('eof')
    except ConnectionResetError:
        print('reset')
    write(out, got)

globals()['cmd_' + sys.argv[1].replace('-', '_')](*sys.argv[2:])
EOF
peer=(python3 "$t_tmp/peer.py")
py() { "${peer[@]}" "$@"; }

# wait_file FILE: up to 10 s for FILE to appear.
wait_file() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	echo "timed out waiting for $1" >&2
	return 1
}

# spawn CMD...: run a program (not a function: its pid is the program's) in
# the background, remembered for cleanup, pid in $spawned.
spawn() {
	"$@" &
	spawned=$!
	pids+=("$spawned")
}

# backend NAME MODE ARGS...: start a peer.py server; its port in $port,
# its pid in $spawned.
backend() {
	local name=$1
	shift
	spawn "${peer[@]}" "$1" "$t_tmp/$name.port" "${@:2}"
	if ! wait_file "$t_tmp/$name.port"; then
		t_bad "backend $name starts"
		exit 1
	fi
	port=$(cat "$t_tmp/$name.port")
}

# start_rockd LOG ARGS...: rockd -F in the background, stderr to LOG, pid in
# $rockd_pid; fails if it exits before logging "started".
start_rockd() {
	local log=$1 i
	shift
	spawn "$ROCKD" -F "$@" 2>"$log"
	rockd_pid=$spawned
	for ((i = 0; i < 200; i++)); do
		rockd_up "$log" && return 0
		kill -0 "$rockd_pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# launch LOG ARGS-FUNCTION: pick $nports free ports into lp[], let the
# function print rockd's arguments one a line, start rockd; again if a
# port was taken meanwhile (other programs may be using loopback too).
launch() {
	local log=$1 try
	for try in 1 2 3 4 5; do
		read -r -a lp < <(py ports "$nports")
		"$2" >"$t_tmp/args"
		mapfile -t args <"$t_tmp/args"
		start_rockd "$log" "${args[@]}" && return 0
		grep -q 'cannot listen: Address already in use' "$log" || break
		echo "try $try: $(grep 'cannot listen' "$log"); again" >&2
	done
	t_bad "rockd starts ($log)"
	sed 's/^/    /' "$log"
	exit 1
}

# exited PID SECONDS: $status is the exit status, or "running" after SECONDS.
exited() {
	local i
	status=running
	for ((i = 0; i < $2 * 20; i++)); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1"
			status=$?
			return
		fi
		sleep 0.05
	done
}

# logged LOG PATTERN: a log line, after the time stamp and pid, matches PATTERN.
logged() { sed 's/^[^ ]* rockd\[[0-9]*\]: //' "$1" | grep -qx -- "$2"; }

# --- 1. -t and the command line -------------------------------------------
# tcheck NAME WANT-RC WANT-STDERR ARGS...
tcheck() {
	local name=$1 rc=$2 want=$3
	shift 3
	"$ROCKD" -t "$@" >"$t_tmp/out" 2>"$t_tmp/err"
	t_eq "-t $name: exit code" $? "$rc"
	t_eq "-t $name: message" "$(cat "$t_tmp/err")" "$want"
}
# conf NAME LINES...: a configuration file, its path in $cf.
conf() {
	cf="$t_tmp/$1.conf"
	shift
	printf '%s\n' "$@" >"$cf"
}
svc='backend 127.0.0.1:7002'
expected='expected: listen [ADDR:]PORT backend HOST:PORT [sniff-ms N]'
sniffbad='sniff-ms needs milliseconds, 0 to 60000'

conf good '# a comment' '' "listen 127.0.0.1:7001 $svc   # trailing" \
	"listen 7003 backend [::1]:7004 sniff-ms 0" \
	"	listen [::1]:7005 backend localhost:7006 sniff-ms 60000" 'pidfile /run/rockd.pid'
"$ROCKD" -t -f "$cf" >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "-t good file: exit 0" $? 0
t_eq "-t good file: says OK" "$(cat "$t_tmp/out")" "rockd: configuration OK"
t_eq "-t good file: nothing on stderr" "$(cat "$t_tmp/err")" ""

conf kw "listen 127.0.0.1:7001 $svc" '# two' 'frobnicate 1'
tcheck "unknown keyword" 2 "rockd: $cf:3: unknown keyword \"frobnicate\"" -f "$cf"
t_eq "-t bad file: nothing on stdout" "$(cat "$t_tmp/out")" ""
conf nobackend 'listen 127.0.0.1:7001'
tcheck "listen without backend" 2 "rockd: $cf:1: $expected" -f "$cf"
conf notbackend 'listen 127.0.0.1:7001 to 127.0.0.1:7002'
tcheck "listen ... to ..." 2 "rockd: $cf:1: $expected" -f "$cf"
conf port0 "listen 127.0.0.1:0 $svc"
tcheck "listen port 0" 2 "rockd: $cf:1: \"127.0.0.1:0\": port must be 1 to 65535" -f "$cf"
conf port65536 'listen 7001 backend 127.0.0.1:65536'
tcheck "backend port 65536" 2 "rockd: $cf:1: \"127.0.0.1:65536\": port must be 1 to 65535" -f "$cf"
conf portabc '' "listen abc $svc"
tcheck "listen port abc" 2 "rockd: $cf:2: \"abc\": port must be 1 to 65535" -f "$cf"
conf nohost "listen 127.0.0.1:7001 backend 7002"
tcheck "backend without host" 2 "rockd: $cf:1: \"7002\": expected HOST:PORT" -f "$cf"
conf dup "listen 127.0.0.1:7001 $svc" "listen 127.0.0.1:7001 backend 127.0.0.1:7009"
overlap="on an overlapping address (a wildcard takes every address; [::] takes IPv4 too)"
tcheck "duplicate listen address" 2 "rockd: $cf:2: \"127.0.0.1:7001\": the same port as \"127.0.0.1:7001\" $overlap" -f "$cf"
# bind(2) would refuse the second of these at start (exit 1): -t says so.
conf wild4 "listen 0.0.0.0:7001 $svc" "listen 7001 backend 127.0.0.1:7009"
tcheck "0.0.0.0:PORT and PORT" 2 "rockd: $cf:2: \"7001\": the same port as \"0.0.0.0:7001\" $overlap" -f "$cf"
conf wild6 "listen 7001 $svc" "listen 127.0.0.1:7001 backend 127.0.0.1:7009"
tcheck "PORT and an IPv4 address" 2 "rockd: $cf:2: \"127.0.0.1:7001\": the same port as \"7001\" $overlap" -f "$cf"
conf wildv4addr "listen 127.0.0.2:7001 $svc" "listen 0.0.0.0:7001 backend 127.0.0.1:7009"
tcheck "an IPv4 address and 0.0.0.0" 2 "rockd: $cf:2: \"0.0.0.0:7001\": the same port as \"127.0.0.2:7001\" $overlap" -f "$cf"
conf mapped "listen [::ffff:127.0.0.1]:7001 $svc" "listen 127.0.0.1:7001 backend 127.0.0.1:7009"
tcheck "an IPv4-mapped address and the same IPv4" 2 "rockd: $cf:2: \"127.0.0.1:7001\": the same port as \"[::ffff:127.0.0.1]:7001\" $overlap" -f "$cf"
conf distinct "listen 127.0.0.1:7001 $svc" "listen 127.0.0.2:7001 backend 127.0.0.1:7009" \
	"listen [::1]:7001 backend 127.0.0.1:7009" "listen 0.0.0.0:7002 backend 127.0.0.1:7009"
"$ROCKD" -t -f "$cf" >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "-t distinct addresses on one port, and 0.0.0.0 on another: exit 0" $? 0
mkdir "$t_tmp/dir.conf"
tcheck "a directory for a file" 2 "rockd: $t_tmp/dir.conf: cannot read: Is a directory" -f "$t_tmp/dir.conf"
conf opt "listen 127.0.0.1:7001 $svc sniff 5"
tcheck "unknown option after backend" 2 "rockd: $cf:1: unknown service option \"sniff\"" -f "$cf"
for v in 60001 -1 abc ''; do
	conf sniff "listen 127.0.0.1:7001 $svc sniff-ms $v"
	tcheck "sniff-ms '$v'" 2 "rockd: $cf:1: $sniffbad" -f "$cf"
done
conf pidrel "listen 127.0.0.1:7001 $svc" 'pidfile rockd.pid'
tcheck "relative pidfile" 2 "rockd: $cf:2: expected: pidfile ABSOLUTE-PATH" -f "$cf"
tcheck "missing file" 2 "rockd: $t_tmp/none.conf: No such file or directory" -f "$t_tmp/none.conf"
conf empty '# nothing here' 'pidfile /run/rockd.pid'
tcheck "no service" 2 "rockd: $cf: no service (a \"listen ... backend ...\" line) configured" -f "$cf"
for v in 0 65 abc ''; do
	conf workers "listen 127.0.0.1:7001 $svc" "workers $v"
	tcheck "workers '$v'" 2 "rockd: $cf:2: expected: workers N (1 to 64) or workers auto" -f "$cf"
done
for v in 0 256 abc '' '3 4'; do
	conf node "listen 127.0.0.1:7001 $svc" "node $v"
	tcheck "node '$v'" 2 "rockd: $cf:2: expected: node N (1 to 255), this rockd's number in its fleet" -f "$cf"
done
conf node7 "listen 127.0.0.1:7001 $svc" 'node 7'
conf peer2 "listen 127.0.0.1:7001 $svc" 'peer 2 127.0.0.1:7002' 'peer 2 127.0.0.1:7003'
tcheck "peer twice" 2 "rockd: $cf:3: peer 2 given twice" -f "$cf"
conf peer0 "listen 127.0.0.1:7001 $svc" 'peer 0 127.0.0.1:7002'
tcheck "peer 0" 2 "rockd: $cf:2: expected: peer N HOST:PORT (N 1 to 255: another node of the fleet, where it listens)" -f "$cf"
udp_expected="expected: udp-address none, udp-address :PORT or udp-address HOST:PORT (PORT 1 to 65535; HOST an address the clients reach, not a wildcard)"
for v in ':0' 'none x' '0.0.0.0:7205' '[::]:7205' ':'; do
	conf udpaddr "listen 127.0.0.1:7001 $svc" "udp-address $v"
	tcheck "udp-address '$v'" 2 "rockd: $cf:2: $udp_expected" -f "$cf"
done
conf udpaddr "listen 127.0.0.1:7001 $svc" "udp-address 198.51.100.7:0"
tcheck "udp-address port 0" 2 "rockd: $cf:2: $udp_expected: \"198.51.100.7:0\": port must be 1 to 65535" -f "$cf"
conf udpaddr "listen 127.0.0.1:7001 $svc" "udp-address 198.51.100.7"
tcheck "udp-address without a port" 2 "rockd: $cf:2: $udp_expected: \"198.51.100.7\": expected HOST:PORT" -f "$cf"
for v in 198.51.100.7:7205 '[2001:db8::7]:7205'; do
	conf udpaddr "listen 127.0.0.1:7001 $svc" "udp-address $v"
	tcheck "udp-address $v" 0 "" -f "$cf"
done
conf udpnone "listen 127.0.0.1:7001 $svc" 'udp-address none' 'node 3' 'peer 1 127.0.0.1:7002' 'peer 3 127.0.0.1:7001'
tcheck "udp-address none, node 3 and its peers" 0 "" -f "$cf"
tcheck "node 7" 0 "" -f "$cf"
tcheck "--node 256" 2 "rockd: --node needs a number, 1 to 255" --node 256 -f "$cf"
"$ROCKD" --session --node 3 >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "--session --node 3: exit 2 with why" "$?:$(cat "$t_tmp/err")" "2:rockd: --session is no fleet's node; drop --node"
conf workersauto "listen 127.0.0.1:7001 $svc" 'workers auto'
tcheck "workers auto" 0 "" -f "$cf"
# auto (the default) fits the control ports it has: one worker here.
conf autoport "listen 127.0.0.1:65535 $svc"
tcheck "no workers line on port 65535" 0 "" -f "$cf"
tcheck "--workers auto on port 65535" 0 "" --workers auto -f "$cf"
conf workersmetrics "listen 127.0.0.1:7001 $svc" 'metrics 127.0.0.1:7009' '' "control $t_tmp/ctl" 'workers 2'
tcheck "workers 2 with metrics and control" 0 "" -f "$cf"
conf workersport "listen 127.0.0.1:65535 $svc" 'workers 2'
past65535="the last worker's control channel (UDP port + N - 1, the listener's or udp-address's) is past 65535; use workers 1"
tcheck "workers 2 on port 65535" 2 "rockd: $cf:2: workers 2: $past65535" -f "$cf"
tcheck "--workers 2 on port 65535" 2 "rockd: workers 2: $past65535" \
	--workers 2 -f "$cf"
conf workersudp "listen 127.0.0.1:7001 $svc" 'udp-address 198.51.100.7:65535' 'workers 2'
tcheck "workers 2 told UDP port 65535" 2 "rockd: $cf:3: workers 2: $past65535" -f "$cf"
conf workersudp "listen 127.0.0.1:7001 $svc" 'udp-address :65535'
tcheck "--workers 2 told UDP port 65535" 2 "rockd: workers 2: $past65535" --workers 2 -f "$cf"
tcheck "no workers line, told UDP port 65535" 0 "" -f "$cf"
tcheck "--workers 65" 2 "rockd: --workers needs a number, 1 to 64, or auto" --workers 65 -f "$cf"
for v in sideways '' 'address connection'; do
	conf spread "listen 127.0.0.1:7001 $svc" "spread $v"
	tcheck "spread '$v'" 2 "rockd: $cf:2: expected: spread address or spread connection" -f "$cf"
done
conf spreadok "listen 127.0.0.1:7001 $svc" 'workers 2' 'spread connection'
tcheck "spread connection" 0 "" -f "$cf"
tcheck "--spread hash" 2 "rockd: --spread needs address or connection" --spread hash -f "$cf"
"$ROCKD" --session --workers 2 >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "--session --workers 2: exit 2, says why" "$? $(cat "$t_tmp/err")" \
	"2 rockd: workers 2: --session is one process; use workers 1"
# The control socket's place: nothing but a stale socket is replaced, no
# directory is made, and only a private one is used.
printf 'keep me\n' >"$t_tmp/afile"
conf ctlfile "listen 127.0.0.1:7001 $svc" '' "control $t_tmp/afile"
tcheck "control on a regular file" 2 "rockd: $cf:3: control $t_tmp/afile: exists and is not a socket (left alone)" -f "$cf"
t_eq "control on a regular file: the file is intact" "$(cat "$t_tmp/afile")" "keep me"
tcheck "--control on a regular file" 2 "rockd: --control $t_tmp/afile: exists and is not a socket (left alone)" \
	--control "$t_tmp/afile" --listen 127.0.0.1:7001 --backend 127.0.0.1:7002
conf ctlnodir "listen 127.0.0.1:7001 $svc" "control $t_tmp/nodir/sub/ctl"
tcheck "control in a missing directory" 2 "rockd: $cf:2: control $t_tmp/nodir/sub/ctl: its directory does not exist" -f "$cf"
t_check "control in a missing directory: none made" test ! -e "$t_tmp/nodir"
mkdir -m 0777 "$t_tmp/pub"
chmod 0777 "$t_tmp/pub"
tcheck "--control in a world-writable directory" 2 \
	"rockd: --control $t_tmp/pub/ctl: its directory must belong to this user (or root) and not be group- or other-writable" \
	--control "$t_tmp/pub/ctl" --listen 127.0.0.1:7001 --backend 127.0.0.1:7002
long=/$(printf '%0107d' 0)
conf ctllong "listen 127.0.0.1:7001 $svc" "control $long"
tcheck "control path of 108 bytes" 2 "rockd: $cf:2: control: a path of at most 107 bytes" -f "$cf"
"$ROCKD" -F --control "$t_tmp/afile" --listen 127.0.0.1:7001 --backend 127.0.0.1:7002 >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "start with --control on a regular file: exit 2, nothing started" "$? $(cat "$t_tmp/out")" "2 "
t_eq "start with --control on a regular file: the file is intact" "$(cat "$t_tmp/afile")" "keep me"

"$ROCKD" -t --listen 127.0.0.1:7001 --backend 127.0.0.1:7002 --listen 7003 -b 127.0.0.1:7004 \
	>"$t_tmp/out" 2>"$t_tmp/err"
t_eq "-t command-line services: exit 0" $? 0
t_eq "-t command-line services: says OK" "$(cat "$t_tmp/out")" "rockd: configuration OK"
# clierr NAME WANT-FIRST-STDERR-LINE ARGS...: exit 2, the message, then usage.
clierr() {
	local name=$1 want=$2
	shift 2
	"$ROCKD" "$@" >"$t_tmp/out" 2>"$t_tmp/err"
	t_eq "$name: exit 2" $? 2
	t_eq "$name: message" "$(head -n 1 "$t_tmp/err")" "$want"
	t_eq "$name: nothing on stdout" "$(cat "$t_tmp/out")" ""
}
clierr "--listen without --backend" "rockd: each --listen needs one --backend after it" \
	-t --listen 127.0.0.1:7001
t_check "--listen without --backend: usage follows" grep -q '^usage: rockd ' "$t_tmp/err"
clierr "--backend before --listen" "rockd: each --listen needs one --backend after it" \
	-t --backend 127.0.0.1:7002 --listen 127.0.0.1:7001
conf good2 "listen 127.0.0.1:7001 $svc"
clierr "both -f and --listen" "rockd: give either -f CONFIG or --listen/--backend" \
	-t -f "$cf" --listen 127.0.0.1:7003 --backend 127.0.0.1:7004
"$ROCKD" -t >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "neither -f nor --listen: the default service (4022 to sshd) is valid" "$?" 0
clierr "unknown option" "$ROCKD: unrecognized option '--bogus'" -t --bogus -f "$cf"
sessionerr="rockd: --session takes no -f, --listen, -t or --metrics (it takes -F, -v, -p, -k, --control, --backend, --idle-timeout and --persist)"
clierr "--session with --listen and no --backend" "$sessionerr" --session --listen 7001
clierr "--session with two --listen" "$sessionerr" --session --listen 7001 --listen 7002
clierr "--session with --metrics" "$sessionerr" --session --metrics 127.0.0.1:9187
clierr "--persist without --session" "rockd: --persist needs --session" --persist 5
clierr "--persist not seconds" "rockd: --persist needs seconds, 0 to 86400" --session --persist 5m
clierr "--persist past a day" "rockd: --persist needs seconds, 0 to 86400" --session --persist 86401
clierr "bad --listen port" "rockd: \"127.0.0.1:99999\": port must be 1 to 65535" \
	-t --listen 127.0.0.1:99999 --backend 127.0.0.1:7002

# --- relay checks, one rockd with one service per check ---------------------
head -c 20971520 /dev/urandom >"$t_tmp/client.send"
head -c 20971520 /dev/urandom >"$t_tmp/backend.send"
head -c 4096 /dev/urandom >"$t_tmp/half.request"
head -c 1048576 /dev/urandom >"$t_tmp/half.reply"
printf '220 rocks.test ESMTP ready\r\n' >"$t_tmp/banner"
backend duplex duplex-server "$t_tmp/backend.send" "$t_tmp/backend.recv"
b_duplex=$port duplex_pid=$spawned
backend half half-server "$t_tmp/half.reply" "$t_tmp/half.seen"
b_half=$port half_pid=$spawned
backend banner banner-server "$t_tmp/banner"
b_banner=$port banner_pid=$spawned
backend echo echo-server
b_echo=$port
read -r b_dead < <(py ports 1)
# shellcheck disable=SC2317 # run by launch
relay_args() {
	printf -- '--listen\n127.0.0.1:%s\n--backend\n127.0.0.1:%s\n' \
		"${lp[0]}" "$b_duplex" "${lp[1]}" "$b_half" "${lp[2]}" "$b_banner" \
		"${lp[3]}" "$b_dead" "${lp[4]}" "$b_echo"
	printf -- '--listen\n127.0.0.1:%s\n--backend\n224.0.0.1:9\n' "${lp[5]}"
}
nports=6
launch "$t_tmp/relay.log" relay_args
relay_pid=$rockd_pid

# 2. 20 MiB each way at once, byte-exact.
py duplex-client "${lp[0]}" "$t_tmp/client.send" "$t_tmp/client.recv"
t_eq "duplex: client exits 0" $? 0
wait "$duplex_pid"
t_eq "duplex: backend exits 0" $? 0
t_eq "duplex: backend got the client's 20 MiB exactly" \
	"$(sha256sum <"$t_tmp/backend.recv")" "$(sha256sum <"$t_tmp/client.send")"
t_eq "duplex: client got the backend's 20 MiB exactly" \
	"$(sha256sum <"$t_tmp/client.recv")" "$(sha256sum <"$t_tmp/backend.send")"

# 3. Half-close: the backend sees EOF, then its reply still arrives whole.
py half-client "${lp[1]}" "$t_tmp/half.request" "$t_tmp/half.out"
t_eq "half-close: client exits 0" $? 0
wait "$half_pid"
t_eq "half-close: backend exits 0 (it saw EOF)" $? 0
t_check "half-close: backend got the request exactly" cmp -s "$t_tmp/half.seen" "$t_tmp/half.request"
t_check "half-close: client got the 1 MiB reply after its EOF exactly" \
	cmp -s "$t_tmp/half.out" "$t_tmp/half.reply"

# 4. A server that speaks first: the silent client gets the banner, and only it.
py read-n "${lp[2]}" "$(wc -c <"$t_tmp/banner")" "$t_tmp/banner.out"
t_eq "banner: client exits 0" $? 0
t_check "banner: received exactly" cmp -s "$t_tmp/banner.out" "$t_tmp/banner"
wait "$banner_pid"
t_eq "banner: backend sees the client's close" $? 0

# 5. Nothing listens at the backend: the client is reset, the log says why.
t_eq "backend refused: client is reset" "$(py probe "${lp[3]}")" reset
t_check "backend refused: logged" logged "$t_tmp/relay.log" \
	'warning: on_writable: relay [0-9]*: backend: Connection refused; resetting the client'

# ...and a backend connect that fails at once (multicast: ENETUNREACH).
t_eq "backend unreachable: client is reset" "$(py probe "${lp[5]}")" reset
t_check "backend unreachable: logged" logged "$t_tmp/relay.log" \
	'warning: rockd_relay_start: relay [0-9]*: backend 224.0.0.1:9: Network is unreachable'

# 8. Many clients at once, each 64 KiB echoed byte-exact.
t_eq "200 concurrent clients" "$(py many "${lp[4]}" 200 65536)" "200 of 200 exact"
t_eq "rockd still serves after them" "$(py echo "${lp[4]}" 1000)" ok

kill -TERM "$relay_pid"
exited "$relay_pid" 5
t_eq "idle rockd: SIGTERM exits 0" "$status" 0
t_check "idle rockd: logs stopped" logged "$t_tmp/relay.log" 'info: run: stopped'

# --- 6. SIGTERM in the middle of a transfer ---------------------------------
# The relay may go on for the drain timeout; the client does not read, so
# it is cut then: with a reset both ways, never an end of file that would
# pass the cut stream off as complete.
head -c 33554432 /dev/urandom >"$t_tmp/flood"
backend flood flood-server "$t_tmp/flood" "$t_tmp/flood.full" "$t_tmp/flood.eof"
b_flood=$port
# shellcheck disable=SC2317 # run by launch
term_args() {
	printf -- '-p\n%s\n--drain-timeout\n1\n--listen\n127.0.0.1:%s\n--backend\n127.0.0.1:%s\n' \
		"$t_tmp/rockd.pid" "${lp[0]}" "$b_flood"
}
nports=1
launch "$t_tmp/term.log" term_args
term_pid=$rockd_pid
t_eq "pid file written" "$(cat "$t_tmp/rockd.pid")" "$term_pid"
# The client reads 64 KiB then stops; the backend floods until it stalls.
spawn "${peer[@]}" stall-client "${lp[0]}" 65536 "$t_tmp/stall.started" \
	"$t_tmp/stall.go" "$t_tmp/stall.out" >"$t_tmp/stall.result"
stall_pid=$spawned
wait_file "$t_tmp/stall.started" && wait_file "$t_tmp/flood.full"
kill -TERM "$term_pid"
term_line='info: on_term: signal 15: no new connections; sessions may finish within 1 s'
for ((i = 0; i < 100; i++)); do
	logged "$t_tmp/term.log" "$term_line" && break
	sleep 0.05
done
t_check "SIGTERM: logged" logged "$t_tmp/term.log" "$term_line"
t_check "SIGTERM: rockd waits for the stalled relay" kill -0 "$term_pid"
t_eq "SIGTERM: new connections refused" "$(py probe "${lp[0]}")" refused
wait_file "$t_tmp/flood.eof"
t_eq "SIGTERM: past the drain timeout the backend sees a reset, not an end of file" \
	"$(cat "$t_tmp/flood.eof")" reset
exited "$term_pid" 5
t_eq "SIGTERM: rockd exits 0 once it has cut the relay" "$status" 0
t_check "SIGTERM: rockd logs the cut" logged "$t_tmp/term.log" \
	'info: rockd_relays_cut: relay 1: cut with a reset both ways (drain timeout)'
t_check "SIGTERM: pid file removed" test ! -e "$t_tmp/rockd.pid"
touch "$t_tmp/stall.go"
wait "$stall_pid"
t_eq "SIGTERM: stalled client exits 0" $? 0
t_eq "SIGTERM: the stalled client then sees a reset, not an end of file" \
	"$(cat "$t_tmp/stall.result")" reset
got=$(wc -c <"$t_tmp/stall.out")
t_check "SIGTERM: what the client got ($got of 33554432 bytes) is the backend's stream's start" \
	cmp -s -n "$got" "$t_tmp/stall.out" "$t_tmp/flood"

# --- 7. SIGHUP reload ----------------------------------------------------------
hup_conf="$t_tmp/hup.conf"
# shellcheck disable=SC2317 # run by launch
hup_args() {
	printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "${lp[0]}" "$b_echo" \
		"${lp[1]}" "$b_echo" >"$hup_conf"
	printf -- '-f\n%s\n' "$hup_conf"
}
nports=3
launch "$t_tmp/hup.log" hup_args
hup_pid=$rockd_pid
pA=${lp[0]} pB=${lp[1]} pC=${lp[2]}
mkdir "$t_tmp/s"
spawn "${peer[@]}" session "$pA" "$t_tmp/s" A 3
spawn "${peer[@]}" session "$pB" "$t_tmp/s" B 3
wait_file "$t_tmp/s/A.1" && wait_file "$t_tmp/s/B.1"
t_eq "before reload: relay via A" "$(cat "$t_tmp/s/A.1")" ok
t_eq "before reload: relay via B" "$(cat "$t_tmp/s/B.1")" ok
# hup_wait: SIGHUP, then wait for its on_hup line; 1 if it did not come.
hup_wait() {
	local n i
	n=$(grep -c ': on_hup: ' "$t_tmp/hup.log")
	kill -HUP "$hup_pid"
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -c ': on_hup: ' "$t_tmp/hup.log")" -gt "$n" ] && return 0
		sleep 0.05
	done
	return 1
}
# B removed, C added, A kept; another C if its port was taken meanwhile.
for try in 1 2 3 4 5; do
	printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$pA" "$b_echo" \
		"$pC" "$b_echo" >"$hup_conf"
	hup_wait || break
	grep -q "127.0.0.1:$pC: cannot listen: Address already in use" "$t_tmp/hup.log" || break
	echo "reload try $try: port $pC was taken, again" >&2
	read -r pC < <(py ports 1)
done
t_check "reload: logged" logged "$t_tmp/hup.log" "info: on_hup: configuration reloaded from $hup_conf"
t_check "reload: A kept" logged "$t_tmp/hup.log" \
	"info: rockd_services_reload: 127.0.0.1:$pA: kept, backend 127.0.0.1:$b_echo"
t_check "reload: C listening" logged "$t_tmp/hup.log" \
	"info: start_one: listening on 127.0.0.1:$pC, backend 127.0.0.1:$b_echo"
touch "$t_tmp/s/go.2"
wait_file "$t_tmp/s/A.2" && wait_file "$t_tmp/s/B.2"
t_eq "after reload: live relay via kept A still exact" "$(cat "$t_tmp/s/A.2")" ok
t_eq "after reload: live relay via removed B still exact" "$(cat "$t_tmp/s/B.2")" ok
t_eq "after reload: new client on A" "$(py echo "$pA" 100000)" ok
t_eq "after reload: new service C relays" "$(py echo "$pC" 100000)" ok
t_eq "after reload: removed B refuses" "$(py probe "$pB")" refused
# A broken file: logged, the running configuration stays.
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\nbogus\n' "$pB" "$b_echo" >"$hup_conf"
hup_wait
bad="error: on_hup: reload failed, keeping the running configuration: $hup_conf:2: unknown keyword \"bogus\""
t_check "broken reload: logged" logged "$t_tmp/hup.log" "$bad"
touch "$t_tmp/s/go.3"
wait_file "$t_tmp/s/A.3" && wait_file "$t_tmp/s/B.3"
t_eq "broken reload: live relay via A still exact" "$(cat "$t_tmp/s/A.3")" ok
t_eq "broken reload: live relay via B still exact" "$(cat "$t_tmp/s/B.3")" ok
t_eq "broken reload: A still relays" "$(py echo "$pA" 100000)" ok
t_eq "broken reload: C still relays" "$(py echo "$pC" 100000)" ok
t_eq "broken reload: B not started" "$(py probe "$pB")" refused
kill -TERM "$hup_pid"
exited "$hup_pid" 5
t_eq "reloaded rockd: SIGTERM exits 0" "$status" 0

# --- 9. Without -F: rockd detaches; relative -f and -p keep their meaning ----
# gone PID SECONDS: a process not our child has exited within SECONDS.
# shellcheck disable=SC2317 # run by t_check
gone() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}
mkdir "$t_tmp/d"
for try in 1 2 3 4 5; do
	read -r pD pE < <(py ports 2)
	printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$pD" "$b_echo" >"$t_tmp/d/rockd.conf"
	(cd "$t_tmp/d" && exec "$ROCKD" -f rockd.conf -p rockd.pid)
	rc=$?
	[ "$rc" = 0 ] && break
	echo "daemon try $try: exit $rc (a port taken?); again" >&2
done
t_eq "daemon: the starting process exits 0" "$rc" 0
if wait_file "$t_tmp/d/rockd.pid"; then
	d_pid=$(cat "$t_tmp/d/rockd.pid")
	t_check "daemon: relative pid file names a live process" kill -0 "$d_pid"
else
	t_bad "daemon: relative pid file written"
	# The pid from the listening socket, for the checks and the cleanup.
	d_pid=$(ss -Htlnp "sport = :$pD" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
fi
pids+=("$d_pid")
t_eq "daemon: relays" "$(py echo "$pD" 100000)" ok
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$pD" "$b_echo" \
	"$pE" "$b_echo" >"$t_tmp/d/rockd.conf"
kill -HUP "$d_pid"
for ((i = 0; i < 100; i++)); do
	[ "$(py echo "$pE" 1000)" = ok ] && break
	sleep 0.05
done
t_eq "daemon: SIGHUP re-reads the relative config file" "$(py echo "$pE" 100000)" ok
kill -TERM "$d_pid"
t_check "daemon: SIGTERM ends it" gone "$d_pid" 5
t_check "daemon: relative pid file removed" test ! -e "$t_tmp/d/rockd.pid"

# --- workers without -F: the command returns once all listen ---------------
wport=$(free_port) wbe=$(free_port)
socat "TCP4-LISTEN:$wbe,bind=127.0.0.1,reuseaddr,fork" EXEC:cat 2>/dev/null &
pids+=($!)
"$ROCKD" --workers 2 -p "$t_tmp/w.pid" -k "$t_tmp/w.key" --listen "127.0.0.1:$wport" \
	--backend "127.0.0.1:$wbe" >"$t_tmp/w.out" 2>"$t_tmp/w.err"
t_eq "workers 2 in the background: exit 0, nothing on stdout" "$? $(cat "$t_tmp/w.out")" "0 "
wmaster=$(cat "$t_tmp/w.pid" 2>/dev/null)
pids+=("$wmaster")
t_eq "workers 2 in the background: the pid file's process has 2 children" \
	"$(pgrep -P "${wmaster:-1}" -c rockd)" 2
t_eq "workers 2 in the background: 2 listeners" "$(ss -Htln "sport = :$wport" | wc -l)" 2
t_eq "workers 2 in the background: plain clients are relayed" \
	"$(echo hello | timeout 5 socat -t 2 - "TCP4:127.0.0.1:$wport")" hello
# holders PORT: 24 connections from 127.0.0.1 held open; the pids of the
# workers holding them, one line each, once all 24 are accepted.
holders() {
	local fd i
	for fd in $(seq 20 43); do eval "exec $fd<>/dev/tcp/127.0.0.1/$1"; done
	for i in $(seq 100); do
		[ "$(ss -Htnp state established "( sport = :$1 )" | grep -c 'pid=')" -ge 24 ] && break
		sleep 0.05
	done
	ss -Htnp state established "( sport = :$1 )" | sed -n 's/.*pid=\([0-9]*\),.*/\1/p' | sort | uniq -c |
		awk '{ print $1 }' | sort -n | tr '\n' ' '
	for fd in $(seq 20 43); do eval "exec $fd>&-"; done
}
t_eq "workers 2, spread address (the default): one address's 24 connections on one worker" \
	"$(holders "$wport")" "24 "
# The port held by the first: a second rockd with workers cannot listen,
# nor join the first's group (its own steering program would stay).
"$ROCKD" --workers 3 -k "$t_tmp/w.key" --listen "127.0.0.1:$wport" \
	--backend "127.0.0.1:$wbe" >"$t_tmp/w2.out" 2>&1
t_eq "workers 3 on a port another rockd's workers hold: exit 1" $? 1
t_check "and says why" grep -q "127.0.0.1:$wport: cannot listen: Address already in use" "$t_tmp/w2.out"
t_eq "and the first's steering holds: 24 connections on one worker" "$(holders "$wport")" "24 "
# Worker 1's control channel is UDP port + 1: taken, the start fails
# once, naming the port, before any worker starts.
uport=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1]) + 1))
time.sleep(30)' "$uport" &
upid=$!
pids+=("$upid")
for _ in $(seq 100); do ss -Huln "sport = :$((uport + 1))" | grep -q . && break; sleep 0.05; done
"$ROCKD" --workers 2 -k "$t_tmp/w.key" --listen "127.0.0.1:$uport" \
	--backend "127.0.0.1:$wbe" >"$t_tmp/wu.out" 2>&1
t_eq "workers 2 with UDP port + 1 taken: exit 1, one line naming it" "$? $(sed 's/^[^ ]* rockd\[[0-9]*\]: //' "$t_tmp/wu.out")" \
	"1 error: rockd_services_unclaimed: 127.0.0.1:$uport: UDP port $((uport + 1)), worker 1's control channel (the port + 1): Address already in use; free it, or set workers"
kill "$upid"
kill "$wmaster"
for _ in $(seq 100); do kill -0 "$wmaster" 2>/dev/null || break; sleep 0.05; done
t_check "workers 2: SIGTERM stops the master" bash -c "! kill -0 $wmaster 2>/dev/null"
t_check "workers 2: and its pid file goes" test ! -e "$t_tmp/w.pid"

# spread connection: the kernel's hash spreads one address's connections;
# a hand-over to another spread sets or removes the listeners' program.
sport=$(free_port)
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\nworkers 2\nspread connection\n' \
	"$sport" "$wbe" >"$t_tmp/ws.conf"
"$ROCKD" -f "$t_tmp/ws.conf" -p "$t_tmp/ws.pid" -k "$t_tmp/w.key" >"$t_tmp/ws.out" 2>"$t_tmp/ws.err"
t_eq "workers 2, spread connection: started" $? 0
wsmaster=$(cat "$t_tmp/ws.pid" 2>/dev/null)
pids+=("$wsmaster")
t_eq "workers 2, spread connection: one address's 24 connections on both workers" \
	"$(holders "$sport" | wc -w)" 2
# USR2 WANT: a hand-over with spread WANT in the file; the new master.
usr2_spread() {
	local i old=$wsmaster
	sed -i "s/^spread .*/spread $1/" "$t_tmp/ws.conf"
	kill -USR2 "$wsmaster"
	for ((i = 0; i < 200; i++)); do
		[ "$(cat "$t_tmp/ws.pid" 2>/dev/null)" != "$old" ] &&
			! kill -0 "$old" 2>/dev/null && break
		sleep 0.05
	done
	wsmaster=$(cat "$t_tmp/ws.pid")
	pids+=("$wsmaster")
	t_check "USR2 to spread $1: a new master ($wsmaster) took over from $old" \
		test "$wsmaster" != "$old" -a ! -d "/proc/$old"
}
usr2_spread address
t_eq "USR2 to spread address: the taken-over listeners steer (24 on one worker)" \
	"$(holders "$sport")" "24 "
usr2_spread connection
t_eq "USR2 back to spread connection: the program is gone (both workers)" \
	"$(holders "$sport" | wc -w)" 2
kill "$wsmaster"

# A hand-over cannot change the number of workers: refused, the running
# rockd serves on.
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\nworkers 2\n' "$wport" "$wbe" >"$t_tmp/w.conf"
"$ROCKD" -F -f "$t_tmp/w.conf" -k "$t_tmp/w.key" -p "$t_tmp/w3.pid" 2>"$t_tmp/w3.log" &
pids+=($!)
for _ in $(seq 100); do grep -q ' 2 workers started$' "$t_tmp/w3.log" && break; sleep 0.05; done
w3=$(cat "$t_tmp/w3.pid")
sed -i 's/^workers 2$/workers 3/' "$t_tmp/w.conf"
kill -USR2 "$w3"
for _ in $(seq 200); do grep -q 'still serving' "$t_tmp/w3.log" && break; sleep 0.05; done
t_check "USR2 to workers 2 with workers 3 in the file: the successor says why" \
	grep -q "rockd: workers 3, but the running rockd has 2: a change of workers takes a restart" "$t_tmp/w3.log"
t_check "and the running master serves on" grep -q "hand-over: successor [0-9]* exited with status 2 (its configuration is bad: see its message); still serving" "$t_tmp/w3.log"
t_eq "and relays" "$(echo again | timeout 5 socat -t 2 - "TCP4:127.0.0.1:$wport")" again
t_eq "and keeps the pid file" "$(cat "$t_tmp/w3.pid")" "$w3"
kill "$w3"

# A sanitized build reports into the logs.
t_eq "no sanitizer reports in rockd's logs" \
	"$(cat "$t_tmp"/*.log | grep -c -e 'Sanitizer' -e 'runtime error')" 0
t_done
