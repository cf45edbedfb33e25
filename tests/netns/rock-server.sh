#!/usr/bin/env bash
# rock-server.sh: python3's http.server run under rock (ROCK_SERVE unset: servers accept rocks by default), no rockd anywhere, serves rock curl byte-exact through an RST, a 15 s blackhole and a client address change; plain curl gets the same bytes at once; with ROCK_SERVE=0 a rock client gets a plain connection; no client stalls a server (20 stalled hellos and 1,000 probes/s against four kinds of server); a forking server (socat fork) serves its rock client through the parent's relay, byte-exact to the end.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
ROCK="$top_builddir/tools/rock"
[ -x "$ROCK" ] || t_skip_all "tools/rock not built"
for t in python3 curl sha256sum; do
	command -v "$t" >/dev/null || t_skip_all "$t not installed"
done
rtt=$(nn_profile_rtt_ms "${NN_PROFILE:-lan}") || t_skip_all "unknown path profile ${NN_PROFILE:-}"
rock_netns_up

# ROCK_SERVER_MIB and ROCK_SERVER_MBIT (tbf rate, server to client) size
# the download: long enough that every fault lands mid-stream. On a path
# profile (NN_PROFILE) the path sets the pace: a smaller file, faults
# after smaller steps, deadlines from the rate measured here, timings
# given the round trip, and a smaller file fetched under load.
if [ "$rtt" -eq 0 ]; then
	mib=${ROCK_SERVER_MIB:-100} step=2097152 small_kib=1024
else
	mib=${ROCK_SERVER_MIB:-8} step=262144 small_kib=16
fi
mbit=${ROCK_SERVER_MBIT:-100}
port=8080
www="$t_tmp/www"
mkdir -p "$www" "$t_tmp/state"
head -c $((mib * 1048576)) /dev/urandom >"$www/f.bin"
want=$(sha256sum <"$www/f.bin")
# shellcheck disable=SC2317 # run by nn_cleanup
rm_bins() { rm -f "$www/f.bin" "$t_tmp"/*.bin; }
nn_on_cleanup rm_bins

# The server's key is rockd's default file, made on first use: here, in
# the test's own state directory.
(cd "$www" && XDG_STATE_HOME="$t_tmp/state" ROCK_DEBUG=1 ROCK_LOG="$t_tmp/server.log" \
	t_foreign nn_s "$ROCK" python3 -m http.server -b "$NN_S_ADDR" "$port" >"$t_tmp/http.log" 2>&1) &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" "$port" 5 || t_skip_all "http.server did not start"
url="http://$NN_S_ADDR:$port/f.bin"
# fetch OUT URL: the rock client's download. curl hangs in setlocale() with
# libasan preloaded (see ka-programs.sh): python3's urllib stands in there.
if [ -n "${ROCK_SAN_PRELOAD:-}" ]; then
	client=python3
	fetch=(python3 -c 'import shutil, sys, urllib.request
shutil.copyfileobj(urllib.request.urlopen(sys.argv[2]), open(sys.argv[1], "wb"))')
else
	client=curl
	fetch=(curl -s -o)
fi
accepted() { grep -c 'an accepted rock' "$t_tmp/server.log"; }

# Plain client first: its request is answered at once (no first-bytes
# wait: an HTTP client speaks first), with the file's bytes.
ttfb=$(nn_c curl -s -o "$t_tmp/plain.bin" -w '%{time_starttransfer}' "$url")
t_eq "plain curl: byte-exact" "$(sha256sum <"$t_tmp/plain.bin")" "$want"
t_eq "plain curl: handed over on its first bytes, not after the first-bytes time" \
	"$(grep -c "plain TCP: the client's first bytes are not a rock's" "$t_tmp/server.log") $(grep -c 'plain TCP: silent' "$t_tmp/server.log")" "1 0"
if [ "$rtt" -eq 0 ]; then
	t_check "plain curl: first byte in $ttfb s (< 0.25, the sniff floor is 0.3)" \
		awk -v t="$ttfb" 'BEGIN { exit !(t < 0.25) }'
else
	echo "# plain curl: first byte in $ttfb s on $NN_PROFILE"
fi
t_eq "plain curl: no rock accepted" "$(accepted)" 0

# A profile's own pace stands (and a kernel's netem is a root qdisc too).
if [ "$rtt" -eq 0 ]; then
	nn_r tc qdisc replace dev "$NN_R_CIF" root tbf rate "${mbit}mbit" burst 64kb latency 400ms ||
		t_skip_all "tbf not available"
fi
# BYTES TIMEOUT_S: wait until the download holds BYTES.
# shellcheck disable=SC2317 # called through wait_for
at_least() { [ "$(size "$t_tmp/got.bin")" -ge "$1" ]; }
grown() { wait_for "$2" at_least "$1"; }

start=$(now_ms)
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/client.log" t_foreign nn_c "$ROCK" "${fetch[@]}" "$t_tmp/got.bin" "$url" &
cpid=$! pids+=("$cpid")
step_s=$((10 + rtt / 10))
grown "$step" "$step_s" || t_bad "rock $client: $step bytes did not arrive in $step_s s"
# Bytes per second so far: the deadline for the rest, three times over.
# (4 KB/s at least: a stuck download fails in hours, not days.)
bps=$(($(size "$t_tmp/got.bin") * 1000 / ($(now_ms) - start + 1)))
[ "$bps" -ge 4096 ] || bps=4096
nn_rst_inject both
nap 1
nn_restore
grown $(($(size "$t_tmp/got.bin") + step)) "$step_s" || t_bad "rock $client: no progress after the RST"
nn_blackhole both
nap 5
nn_change_client_addr >/dev/null
nap 10
nn_restore
rest_s=$((30 + 3 * (mib * 1048576 - $(size "$t_tmp/got.bin")) / bps))
echo "# $bps bytes/s before the faults: $rest_s s for the rest"
if wait_pid "$cpid" "$rest_s"; then
	t_eq "rock $client: exit status" "$waited" 0
else
	t_bad "rock $client: not done $rest_s s after the blackhole"
fi
echo "# download with the faults: $(($(now_ms) - start)) ms"
t_eq "rock $client: $mib MiB byte-exact through RST, blackhole, new address" \
	"$(sha256sum <"$t_tmp/got.bin")" "$want"
t_eq "server: one rock accepted" "$(accepted)" 1
t_check "server: the rock's reconnects reached it through its listener (RST, blackhole)" \
	test "$(grep -c 'a reconnect: to the engine' "$t_tmp/server.log")" -ge 2 -a \
	"$(grep -c 'client reconnected' "$t_tmp/server.log")" -ge 2
t_eq "http.server: one GET each (no retry)" "$(grep -c '"GET /f.bin' "$t_tmp/http.log")" 2
t_eq "server key: rockd's default file, mode 600" \
	"$(stat -c %a "$t_tmp/state/rockd/key" 2>&1)" 600
t_check "client: reconnected twice or more" \
	test "$(grep -c 'reconnected; resending' "$t_tmp/client.log")" -ge 2
t_check "no error in the server's log" \
	sh -c "! grep -E 'error|warn|closed: [^b]' '$t_tmp/server.log'"

# An asyncio server: non-blocking listeners in epoll, accept4 flags. A
# probe makes the listener readable and its accept() says EAGAIN; both
# programs' ports serve a plain client and a rock the same bytes. On the
# second port the server speaks first: a plain client waits for the
# first-bytes time (rockd's rule), a rock does not (its hello comes first).
[ "$rtt" -eq 0 ] && nn_r tc qdisc del dev "$NN_R_CIF" root
head -c $((small_kib * 1024)) /dev/urandom >"$www/small.bin"
want=$(sha256sum <"$www/small.bin")
XDG_STATE_HOME="$t_tmp/state" ROCK_DEBUG=1 ROCK_LOG="$t_tmp/aio.log" \
	t_foreign nn_s "$ROCK" python3 "$here/rock-server.py" "$NN_S_ADDR" 8090 "$www/small.bin" \
	>"$t_tmp/aio.out" 2>&1 &
pids+=($!)
# The same server with ROCK_SERVE=0: its listeners are plain, as before
# servers accepted rocks.
ROCK_SERVE=0 XDG_STATE_HOME="$t_tmp/state" ROCK_DEBUG=1 ROCK_LOG="$t_tmp/noserve.log" \
	t_foreign nn_s "$ROCK" python3 "$here/rock-server.py" "$NN_S_ADDR" 8092 "$www/small.bin" \
	>"$t_tmp/noserve.out" 2>&1 &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 8091 5 || t_bad "asyncio server did not start"
nn_wait_port "$NN_S" "$NN_S_ADDR" 8093 5 || t_bad "asyncio server (ROCK_SERVE=0) did not start"
# HOST PORT: the server's bytes on stdout, seconds to the first on stderr.
read_all='import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
t = time.monotonic(); d = s.recv(65536); ttfb = time.monotonic() - t
out = [d]
while d:
    d = s.recv(65536); out.append(d)
sys.stdout.buffer.write(b"".join(out)); print("%.3f" % ttfb, file=sys.stderr)'
got=$(nn_c curl -s "http://$NN_S_ADDR:8090/" | sha256sum)
t_eq "asyncio, plain curl: byte-exact" "$got" "$want"
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/aio-client.log" t_foreign nn_c "$ROCK" "${fetch[@]}" "$t_tmp/aio.bin" "http://$NN_S_ADDR:8090/"
got=$(sha256sum <"$t_tmp/aio.bin")
t_eq "asyncio, rock $client: byte-exact" "$got" "$want"
t_eq "asyncio: the rock accepted" "$(grep -c 'an accepted rock' "$t_tmp/aio.log")" 1
got=$(nn_c python3 -c "$read_all" "$NN_S_ADDR" 8091 2>"$t_tmp/ttfb" | sha256sum)
t_eq "server speaks first, plain client: byte-exact" "$got" "$want"
# The first-bytes time's floor and a round trip at least; at most the
# time itself (rock_first_bytes_ms: 300 ms, or 5 round trips and 100 ms,
# from the server's own measure of the path) and a round trip, a second
# more, and on a profile a lost packet's resend too (3 round trips).
lo=$((300 + rtt))
hi=$((5 * rtt + 100 > 300 ? 5 * rtt + 100 : 300))
hi=$((hi + rtt + 1000 + (rtt > 0) * 3 * rtt))
t_check "server speaks first, plain client: first byte after $(cat "$t_tmp/ttfb") s ($lo to $hi ms)" \
	awk -v t="$(cat "$t_tmp/ttfb")" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(t >= lo / 1000 && t < hi / 1000) }'
t_eq "server speaks first: the plain client handed over after the first-bytes time" \
	"$(grep -c 'plain TCP: silent for the first-bytes time' "$t_tmp/aio.log")" 1
got=$(ROCK_DEBUG=1 ROCK_LOG="$t_tmp/aio-client2.log" t_foreign nn_c "$ROCK" python3 -c "$read_all" \
	"$NN_S_ADDR" 8091 2>"$t_tmp/ttfb" | sha256sum)
t_eq "server speaks first, rock: byte-exact" "$got" "$want"
t_check "server speaks first, rock: first byte after $(cat "$t_tmp/ttfb") s (< $((250 + 7 * rtt)) ms)" \
	awk -v t="$(cat "$t_tmp/ttfb")" -v r="$rtt" 'BEGIN { exit !(t < 0.25 + 7 * r / 1000) }'
t_eq "server speaks first: the rock never waited the first-bytes time" \
	"$(grep -c 'plain TCP: silent for the first-bytes time' "$t_tmp/aio.log")" 1
t_check "asyncio: both ports' probes answered by the engine" \
	test "$(grep -c 'an EDP probe: announced' "$t_tmp/aio.log")" -eq 2
t_eq "asyncio: two rocks accepted" "$(grep -c 'an accepted rock' "$t_tmp/aio.log")" 2
t_check "asyncio: no error" sh -c "! grep -iE 'error|Traceback' '$t_tmp/aio.out' '$t_tmp/aio.log'"
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/noserve-client.log" t_foreign nn_c "$ROCK" "${fetch[@]}" \
	"$t_tmp/noserve.bin" "http://$NN_S_ADDR:8092/"
t_eq "ROCK_SERVE=0, rock $client: byte-exact" "$(sha256sum <"$t_tmp/noserve.bin")" "$want"
# The client's probe reached the program (a connection closed at once),
# no announcement came back: the client's connection is plain TCP.
t_eq "ROCK_SERVE=0: the client's connection plain, the server's log has no rock" \
	"$(grep -c "no rock (.*); plain TCP" "$t_tmp/noserve-client.log") $(grep -cE 'accepted rock|EDP probe' "$t_tmp/noserve.log")" "1 0"

# No client stalls a server: 20 connections held in the middle of a
# rock's hello and 1,000 probes a second (stall-load.py) against each kind
# of server (threads and poll: http.server; epoll and non-blocking
# accept4: asyncio; blocking accept: socketserver, and a bare accept()
# loop with no poll). A plain and a rock client are each served within
# 1.5x their time without the load (medians of 9), the rocks as rocks,
# give or take 5 ms: the scheduler's noise on a shared 2-core machine
# (make check runs another test beside this one), far below any wait on a
# client (the first-bytes time alone is 300 ms; a stalled hello held
# accept() 10 s before).
XDG_STATE_HOME="$t_tmp/state" ROCK_DEBUG=1 ROCK_LOG="$t_tmp/blocking.log" \
	t_foreign nn_s "$ROCK" python3 "$here/rock-serve-blocking.py" "$NN_S_ADDR" 8096 "$www/small.bin" \
	>"$t_tmp/blocking.out" 2>&1 &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 8097 5 || t_bad "blocking servers did not start"
# KIND URL: the seconds one fetch took, plain or through rock.
one_fetch() {
	local pre=()
	[ "$1" = rock ] && pre=("$ROCK")
	if [ -n "$ROCK_SAN_PRELOAD" ]; then
		t_foreign nn_c "${pre[@]}" python3 -c 'import sys, time, urllib.request
t = time.monotonic(); urllib.request.urlopen(sys.argv[1]).read()
print("%.6f" % (time.monotonic() - t))' "$2"
	else
		t_foreign nn_c "${pre[@]}" curl -s -o /dev/null -w '%{time_total}\n' "$2"
	fi
}
# KIND URL: the median of 9 fetches; all 9 go to $t_tmp/fetches.
median_fetch() {
	local i
	for i in 1 2 3 4 5 6 7 8 9; do one_fetch "$1" "$2"; done | sort -n >"$t_tmp/fetches"
	sed -n 5p "$t_tmp/fetches"
}
# The probes' rate: 1,000/s, or on a profile with a rate of its own at
# most what takes a fifth of it (a probe and its answer are ~600 bytes
# each way), lest the load measure the path instead of the server.
path_mbit=$(nn_profile_netem "$(nn_profile_base "${NN_PROFILE:-lan}")" | sed -n 's/.*rate \([0-9]*\)mbit.*/\1/p')
probe_rate=1000
[ -n "$path_mbit" ] && [ $((path_mbit * 40)) -lt 1000 ] && probe_rate=$((path_mbit * 40))
# GOT BASE: GOT is within 1.5x BASE (and the noise above; on a profile,
# two round trips more: a lost packet in a median fetch).
slack=$(awk -v r="$rtt" 'BEGIN { printf "%.3f", 0.005 + 2 * r / 1000 }')
within() { awk -v g="$1" -v b="$2" -v s="$slack" 'BEGIN { exit !(g > 0 && g <= 1.5 * b + s) }'; }
ratio() { awk -v g="$1" -v b="$2" 'BEGIN { printf "%.2f", g / b }'; }
for srv in "http.server 8080 /small.bin server.log" "asyncio 8090 / aio.log" \
	"socketserver 8096 / blocking.log" "accept-loop 8097 / blocking.log"; do
	# shellcheck disable=SC2086 # four words
	set -- $srv
	url="http://$NN_S_ADDR:$2$3"
	plain0=$(median_fetch plain "$url")
	rock0=$(median_fetch rock "$url")
	rocks0=$(grep -c 'an accepted rock' "$t_tmp/$4")
	silent0=$(grep -c 'plain TCP: silent' "$t_tmp/$4")
	rm -rf "$t_tmp/load"
	mkdir "$t_tmp/load"
	t_foreign nn_c python3 "$here/stall-load.py" "$NN_S_ADDR" "$2" 20 "$probe_rate" $((60 + rtt / 5)) \
		"$t_tmp/load" 2>"$t_tmp/load.log" &
	load=$! pids+=("$load")
	wait_for "$step_s" test -e "$t_tmp/load/ready" || t_bad "$1: the load did not start"
	nap 0.5
	loaded=$(now_ms)
	plain1=$(median_fetch plain "$url")
	plain1_max=$(tail -1 "$t_tmp/fetches")
	rock1=$(median_fetch rock "$url")
	rock1_max=$(tail -1 "$t_tmp/fetches")
	loaded=$(($(now_ms) - loaded))
	rocks1=$(grep -c 'an accepted rock' "$t_tmp/$4")
	silent1=$(grep -c 'plain TCP: silent' "$t_tmp/$4")
	touch "$t_tmp/load/stop"
	wait "$load"
	echo "# $1, 20 stalled hellos and $probe_rate probes/s: plain $plain0 -> $plain1 s" \
		"($(ratio "$plain1" "$plain0")x), rock $rock0 -> $rock1 s ($(ratio "$rock1" "$rock0")x)"
	echo "# $(cat "$t_tmp/load.log"); the 18 fetches under load took $loaded ms, the slowest $plain1_max s plain, $rock1_max s rock"
	# The rate says the load was made as asked; "none failed" that the
	# server accepted every probe.
	t_check "$1 under load: the probes came at $((probe_rate * 9 / 10))/s or more, none failed" \
		awk -v want=$((probe_rate * 9 / 10)) '/stall-load:/ { r = $7; sub(/[(]/, "", r); sub(/\/s,/, "", r); ok = r + 0 >= want && $8 == 0 } END { exit !ok }' "$t_tmp/load.log"
	t_check "$1 under load: plain curl in $plain1 s, within 1.5x of $plain0 (+$slack s)" within "$plain1" "$plain0"
	t_check "$1 under load: rock curl in $rock1 s, within 1.5x of $rock0 (+$slack s)" within "$rock1" "$rock0"
	t_eq "$1 under load: the 9 rock fetches were rocks" "$((rocks1 - rocks0))" 9
	# A stalled hello or a probe's end that a loss delays past the
	# first-bytes time is a silent client's, the program's to bound;
	# where nothing is lost, every one is the engine's.
	if [ "$rtt" -eq 0 ]; then
		t_eq "$1 under load: no connection handed over for its silence" "$((silent1 - silent0))" 0
	else
		echo "# $1 under load: $((silent1 - silent0)) connections handed over for their silence"
	fi
done
t_check "blocking servers: no error" sh -c "! grep -iE 'error|Traceback' '$t_tmp/blocking.out'"

# A forking server under rock: the rock the parent accepted is
# shared with the child that serves it, through the parent's relay
# (lib/shim/fork.c); the client gets every byte and the real end.
XDG_STATE_HOME="$t_tmp/state" ROCK_DEBUG=1 ROCK_LOG="$t_tmp/fork.log" \
	t_foreign nn_s "$ROCK" socat TCP4-LISTEN:8094,bind="$NN_S_ADDR",reuseaddr,fork \
	SYSTEM:"cat $www/small.bin" 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 8094 5 || t_bad "socat fork did not start"
read_end='import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); n = 0
try:
    while True:
        d = s.recv(65536)
        if not d:
            print("end of stream after", n); break
        n += len(d)
except OSError as e:
    print(e.strerror)'
small=$(stat -c %s "$www/small.bin")
t_eq "forking server: the rock client gets all $small bytes, then the end" \
	"$(t_foreign nn_c "$ROCK" python3 -c "$read_end" "$NN_S_ADDR" 8094 2>&1)" "end of stream after $small"
t_eq "forking server: a plain client the same" \
	"$(t_foreign nn_c python3 -c "$read_end" "$NN_S_ADDR" 8094 2>&1)" "end of stream after $small"
t_check "forking server: the accepted rock was relayed for the child, none reset" \
	test "$(grep -c 'fork: 1 rocks shared with the child' "$t_tmp/fork.log")" -ge 1 -a \
	"$(grep -c 'ended with a reset' "$t_tmp/fork.log")" = 0
t_done
