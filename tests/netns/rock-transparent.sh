#!/usr/bin/env bash
# rock-transparent.sh: unmodified clients under `rock`, one per I/O style, stay byte-exact through rockd while the path is blackholed, reset and renumbered; plain peers stay plain.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
IO="$top_builddir/tests/rock-io"
[ -x "$ROCKD" ] && [ -x "$IO" ] || t_skip_all "rockd or tests/rock-io not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
rock_netns_up

modes="blocking waitall sendfile halfclose threads dup poll select epoll-lt epoll-et epoll-oneshot many epoll-many sockopts mmsg stdio"
bytes=${ROCK_IO_BYTES:-4000000}
echo_port=7100 rock_port=7101 plain_port=7102

# A slow path, so that every fault lands mid-stream; a short queue, so
# that the chunk-by-chunk styles are not starved by the streaming ones.
for dev in "$NN_R_CIF" "$NN_R_SIF"; do
	nn_r tc qdisc replace dev "$dev" root tbf rate 16mbit burst 32kb latency 50ms ||
		t_skip_all "tbf not available"
done

nn_s socat "TCP4-LISTEN:$echo_port,bind=127.0.0.1,reuseaddr,fork" EXEC:cat 2>"$t_tmp/echo.log" &
pids+=($!)
nn_s socat "TCP4-LISTEN:$plain_port,reuseaddr,fork" EXEC:cat 2>"$t_tmp/plain-echo.log" &
pids+=($!)
nn_s "$ROCKD" -F -v --listen "$rock_port" --backend "127.0.0.1:$echo_port" 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 "$echo_port" 5 && nn_wait_port "$NN_S" "$NN_S_ADDR" "$rock_port" 5 &&
	nn_wait_port "$NN_S" "$NN_S_ADDR" "$plain_port" 5 || t_skip_all "servers did not start"

# MODE PORT TAG: one client under rock, its output and library log kept.
client() {
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$3.log" nn_c "$ROCK" "$IO" "$1" "$NN_S_ADDR" "$2" "$bytes" \
		>"$t_tmp/$3.out" 2>"$t_tmp/$3.err"
}

declare -A cpid
for m in $modes; do
	client "$m" "$rock_port" "$m" &
	cpid[$m]=$!
	pids+=($!)
done

# Every connection a rock before the first fault: a connect caught by the
# blackhole is retried into the RSTs, which refuse it as they would a
# plain one (many's eight took over 10 s under the sanitizers on a loaded
# host). One connection per mode; many and epoll-many make eight, stdio
# two, sockopts three (two of them to compare options never set).
rocks_wanted=$(($(echo "$modes" | wc -w) - 2 + 16 + 1 + 2))
rocks_now() {
	local m
	for m in $modes; do cat "$t_tmp/$m.log" 2>/dev/null; done | grep -c ': a rock$'
}
rocks_up() { [ "$(rocks_now)" -ge "$rocks_wanted" ]; }
if wait_for 60 rocks_up; then
	t_ok "all $rocks_wanted connections were rocks before the faults"
else
	t_bad "only $(rocks_now) of $rocks_wanted connections were rocks 60 s after the start"
fi
nap 1
nn_log "blackhole, 5 s"
nn_blackhole both
nap 5
nn_restore
nap 3
nn_log "RSTs, 2 s"
nn_rst_inject both
nap 2
nn_restore
nap 2
nn_log "client address change"
nn_change_client_addr >/dev/null

for m in $modes; do
	if ! wait_pid "${cpid[$m]}" 180; then
		t_bad "$m: still running 3 minutes after the faults"
		tail -3 "$t_tmp/$m.log" | sed 's/^/    /'
		continue
	fi
	t_eq "$m: exit status" "$waited" 0
	want="$m: $bytes bytes echoed byte-exact"
	[ "$m" != many ] && [ "$m" != epoll-many ] || want="$want on each of 8 connections"
	t_eq "$m: output" "$(cat "$t_tmp/$m.out")" "$want"
	[ ! -s "$t_tmp/$m.err" ] || sed 's/^/    /' "$t_tmp/$m.err"
	t_check "$m: its connection was a rock" grep -q ': a rock$' "$t_tmp/$m.log"
	if [ "$m" = many ] || [ "$m" = epoll-many ]; then
		t_eq "$m: eight rocks in one process" "$(grep -c ': a rock$' "$t_tmp/$m.log")" 8
		t_eq "$m: every one of them reconnected" \
			"$(grep ': reconnected; resending' "$t_tmp/$m.log" | awk '{ print $6 }' | sort -u | wc -l)" 8
	fi
	n=$(grep -c ': reconnected; resending' "$t_tmp/$m.log")
	if [ "$n" -ge 1 ]; then
		t_ok "$m: it reconnected $n times while the program saw nothing"
	else
		t_bad "$m: it never reconnected (the faults missed it: the test proved little)"
	fi
done
t_eq "rockd: one backend connection per connection" \
	"$(grep -c 'client connected, backend' "$t_tmp/rockd.log")" "$rocks_wanted"

# No rockd at the destination: plain TCP, untouched, nothing left behind.
bytes=200000
client blocking "$plain_port" plain
t_eq "plain peer: exit status" "$?" 0
t_eq "plain peer: output" "$(cat "$t_tmp/plain.out")" "blocking: $bytes bytes echoed byte-exact"
t_check "plain peer: the library fell back to plain TCP" grep -q 'no rock (.*); plain TCP' "$t_tmp/plain.log"
if grep -q 'engine thread started' "$t_tmp/plain.log"; then
	t_bad "plain peer: an engine thread was started for it"
else
	t_ok "plain peer: no engine thread started for it"
fi

# A port map to rockd: the program connects to a port nothing listens on
# and gets a rock through rockd; getpeername still says the port it chose
# (rock-io checks that on every connection).
ROCK_PORT_MAP="7150=$rock_port" client blocking 7150 portmap
t_eq "port map to rockd: exit status" "$?" 0
t_eq "port map to rockd: output" "$(cat "$t_tmp/portmap.out")" "blocking: $bytes bytes echoed byte-exact"
[ ! -s "$t_tmp/portmap.err" ] || sed 's/^/    /' "$t_tmp/portmap.err"
t_check "port map to rockd: a rock" grep -q ': a rock$' "$t_tmp/portmap.log"

# A port map whose rockd port answers nothing: the original port, plain.
ROCK_PORT_MAP="$plain_port=7199" client poll "$plain_port" mapped
t_eq "mapped port without rockd: exit status" "$?" 0
t_eq "mapped port without rockd: output" "$(cat "$t_tmp/mapped.out")" "poll: $bytes bytes echoed byte-exact"
t_check "mapped port without rockd: probe refused, plain TCP" \
	grep -q 'no rock (system error: Connection refused); plain TCP' "$t_tmp/mapped.log"

# connect() fails under rock exactly as without it: refused, unreachable,
# timed out; and a non-blocking connect's own timeout (500 ms) holds.
nn_c ip route add unreachable 192.0.2.0/24
nn_c sysctl -qw net.ipv4.tcp_syn_retries=1 # a blocking SYN gives up after 3 s
# NAME HOST PORT: the outcome under rock must equal the plain one.
same_connect() {
	local plain rock
	plain=$(ROCK_MODE=off nn_c "$ROCK" "$IO" connect "$2" "$3" 500 2>&1)
	rock=$(ROCK_DEBUG=1 ROCK_LOG="$t_tmp/connect-$1.log" nn_c "$ROCK" "$IO" connect "$2" "$3" 500 2>&1)
	t_eq "connect, $1: as plain TCP ($(echo "$plain" | paste -sd' ' -))" "$rock" "$plain"
}
same_connect refused "$NN_S_ADDR" 7199
same_connect unreachable 192.0.2.1 80
nn_blackhole both
same_connect "timed out" "$NN_S_ADDR" 7198
nn_restore
t_done
