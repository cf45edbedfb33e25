#!/usr/bin/env bash
# rock-programs.sh: real programs under `rock` (curl, socat, a python3 selectors client) stay byte-exact through rockd across a blackhole.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
[ -x "$ROCKD" ] || t_skip_all "rockd not built"
for t in socat python3 sha256sum; do
	command -v "$t" >/dev/null || t_skip_all "$t not installed"
done
rock_netns_up
# shellcheck disable=SC2317 # run by nn_cleanup
rm_bins() { rm -f "$t_tmp"/*.bin; }
nn_on_cleanup rm_bins

mib=${ROCK_PROGRAMS_MIB:-100}
for dev in "$NN_R_CIF" "$NN_R_SIF"; do
	nn_r tc qdisc replace dev "$dev" root tbf rate 100mbit burst 64kb latency 50ms ||
		t_skip_all "tbf not available"
done

# The servers: an HTTP server with a big file and an echo, each fronted by rockd.
mkdir -p "$t_tmp/www"
head -c $((mib * 1048576)) /dev/urandom >"$t_tmp/www/big.bin"
big_sum=$(sha256sum <"$t_tmp/www/big.bin")
nn_s python3 -m http.server 8000 --bind 127.0.0.1 --directory "$t_tmp/www" \
	>"$t_tmp/http.log" 2>&1 &
pids+=($!)
nn_s socat TCP4-LISTEN:7000,bind=127.0.0.1,reuseaddr,fork EXEC:cat 2>"$t_tmp/echo.log" &
pids+=($!)
nn_s "$ROCKD" -F -v --listen 8080 --backend 127.0.0.1:8000 \
	--listen 7001 --backend 127.0.0.1:7000 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 8000 10 && nn_wait_port "$NN_S" 127.0.0.1 7000 5 &&
	nn_wait_port "$NN_S" "$NN_S_ADDR" 8080 5 && nn_wait_port "$NN_S" "$NN_S_ADDR" 7001 5 ||
	t_skip_all "servers did not start"

# TAG CMD...: a program in the client namespace under rock, its library log kept.
under_rock() {
	local tag=$1
	shift
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$tag.rock.log" t_foreign nn_c "$ROCK" "$@"
}

# TAG: the program's connection was a rock and came back after the fault.
was_rock() {
	t_check "$1: its connection was a rock" grep -q ': a rock$' "$t_tmp/$1.rock.log"
	t_check "$1: the rock reconnected after the blackhole" \
		grep -q ': reconnected; resending' "$t_tmp/$1.rock.log"
}

# --- curl: 100 MiB over HTTP, a 15 s blackhole in the middle --------------
if ! command -v curl >/dev/null; then
	t_skipped "curl: not installed"
elif [ -n "${ROCK_SAN_PRELOAD:-}" ]; then
	t_skipped "curl: hangs in setlocale() with libasan preloaded (see ka-programs.sh)"
else
	under_rock curl curl -sS -o "$t_tmp/got.bin" "http://$NN_S_ADDR:8080/big.bin" \
		2>"$t_tmp/curl.err" &
	cpid=$!
	pids+=("$cpid")
	nap 3
	nn_log "curl: blackhole 15 s at $(stat -c %s "$t_tmp/got.bin" 2>/dev/null) bytes"
	nn_blackhole both
	nap 15
	nn_restore
	if wait_pid "$cpid" 120; then
		t_eq "curl: exit status" "$waited" 0
	else
		t_bad "curl: still running 2 minutes after the blackhole"
	fi
	[ ! -s "$t_tmp/curl.err" ] || sed 's/^/    curl: /' "$t_tmp/curl.err"
	t_eq "curl: $mib MiB, sha256 matches" "$(sha256sum <"$t_tmp/got.bin" 2>/dev/null)" "$big_sum"
	was_rock curl
	rm -f "$t_tmp/got.bin"
fi

# --- socat and python3 (selectors) stream through the echo, 5 s blackhole --
# A slower path, so that the blackhole lands mid-stream.
for dev in "$NN_R_CIF" "$NN_R_SIF"; do
	nn_r tc qdisc replace dev "$dev" root tbf rate 16mbit burst 32kb latency 50ms
done
head -c 8388608 /dev/urandom >"$t_tmp/send.bin"
send_sum=$(sha256sum <"$t_tmp/send.bin")
under_rock socat socat -t 30 - "TCP:$NN_S_ADDR:7001" <"$t_tmp/send.bin" \
	>"$t_tmp/socat.bin" 2>"$t_tmp/socat.err" &
spid=$!
pids+=("$spid")
cat >"$t_tmp/selclient.py" <<'EOF'
# A selectors (epoll) client: sends a file, reads the echo, checks it.
import hashlib, selectors, socket, sys

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(path, "rb").read()
s = socket.socket()
s.setblocking(False)
s.connect_ex((host, port))
sel = selectors.DefaultSelector()
sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
sent, got = 0, bytearray()
while len(got) < len(data):
    for key, ev in sel.select(timeout=60):
        if ev & selectors.EVENT_WRITE and sent < len(data):
            try:
                sent += s.send(data[sent:sent + 65536])
            except BlockingIOError:
                pass
            if sent == len(data):
                sel.modify(s, selectors.EVENT_READ)
        if ev & selectors.EVENT_READ:
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                sys.exit("end of stream after %d of %d bytes" % (len(got), len(data)))
            got += chunk
ok = hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
print("%s %d bytes" % ("echoed" if ok else "CORRUPT", len(got)))
sys.exit(0 if ok else 1)
EOF
under_rock python3 python3 "$t_tmp/selclient.py" "$NN_S_ADDR" 7001 "$t_tmp/send.bin" \
	>"$t_tmp/python.out" 2>"$t_tmp/python.err" &
ppid=$!
pids+=("$ppid")
# Both must be streaming when the path goes dark: python3 under a sanitizer
# can take seconds to start, and a connect made inside the blackhole simply
# completes after it, with nothing to reconnect.
is_rock() { grep -q ': a rock$' "$t_tmp/$1.rock.log" 2>/dev/null; }
wait_for 30 is_rock socat && wait_for 30 is_rock python3 ||
	t_bad "socat, python3: not both rocks within 30 s"
nap 1
nn_log "socat, python3: blackhole 5 s"
nn_blackhole both
nap 5
nn_restore
if wait_pid "$spid" 120; then
	t_eq "socat: exit status" "$waited" 0
else
	t_bad "socat: still running 2 minutes after the blackhole"
fi
t_eq "socat: 8 MiB echoed, sha256 matches" "$(sha256sum <"$t_tmp/socat.bin")" "$send_sum"
was_rock socat
if wait_pid "$ppid" 120; then
	t_eq "python3: exit status" "$waited" 0
else
	t_bad "python3: still running 2 minutes after the blackhole"
fi
t_eq "python3: output" "$(cat "$t_tmp/python.out")" "echoed 8388608 bytes"
[ ! -s "$t_tmp/python.err" ] || sed 's/^/    python3: /' "$t_tmp/python.err"
was_rock python3
t_done
