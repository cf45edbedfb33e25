#!/usr/bin/env bash
# rock-hostile.sh: rockd under hostile input (bad hellos, forged reconnects and heartbeats, half-open floods) while a live rock stream must not notice.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
ROCKCAT="$top_builddir/tools/rockcat"
HOSTILE="$top_builddir/tests/rock-hostile"
for prog in "$ROCKD" "$ROCKCAT" "$HOSTILE"; do
	[ -x "$prog" ] || t_skip_all "$prog not built"
done
for cmd in python3 socat ss; do
	command -v "$cmd" >/dev/null || t_skip_all "$cmd not found"
done
# ROCK_LONG=1: also the 10 s handshake timeout. ROCK_EXHAUST=0: skip the
# resource-exhaustion attacks (slow handshakes, greedy and vanishing clients).
ROCK_LONG=${ROCK_LONG:-0}
ROCK_EXHAUST=${ROCK_EXHAUST:-1}
HALFOPEN=2000
MAX_HANDSHAKES=4096	# daemon/sniff.c
RSS_GROWTH_KIB=$((64 * 1024))
STREAM_MIN=$((20 * 1024 * 1024))

# Half-open connections cost rockd and the tool one descriptor each.
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
nofile=$(ulimit -n)
[ "$nofile" = unlimited ] && nofile=1048576

pids=()
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	local rc=$? p
	exec 3>&-
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

# spawn CMD...: in the background, killed on exit, pid in $spawned.
spawn() {
	"$@" &
	spawned=$!
	pids+=("$spawned")
}

# free_ports N: N loopback TCP ports free a moment ago.
free_ports() {
	python3 -c 'import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s:
    x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))' "$1"
}

# until_true SECONDS CMD...: CMD succeeds within SECONDS.
until_true() {
	local i n=$(($1 * 20))
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	"$@"
}

# shellcheck disable=SC2317 # run by until_true or t_check
started() { rockd_up "$1"; }

# The echo backend: socat, one cat per connection; port in $bport.
start_backend() {
	local try
	for try in 1 2 3 4 5; do
		read -r bport < <(free_ports 1)
		spawn socat TCP-LISTEN:"$bport",bind=127.0.0.1,reuseaddr,fork,backlog=128 EXEC:cat
		until_true 5 listening "$bport" && return 0
		kill "$spawned" 2>/dev/null
		echo "backend try $try: port $bport not listening; again" >&2
	done
	return 1
}

# with_nofile N CMD...: CMD with N descriptors (spawn runs it in a subshell).
# shellcheck disable=SC2317 # run by spawn
with_nofile() {
	ulimit -n "$1" || return
	shift
	exec "$@"
}

# start_rockd LOG NOFILE: rockd -F -v on loopback in front of the backend,
# with NOFILE descriptors; port in $new_port, pid in $new_pid. Again if its
# TCP or UDP port was taken meanwhile.
start_rockd() {
	local try
	for try in 1 2 3 4 5; do
		read -r new_port < <(free_ports 1)
		# One worker: the attacks aim at one engine (its control port,
		# its memory, its log budget); each worker is a whole one.
		spawn with_nofile "$2" "$ROCKD" -F -v --workers 1 \
			--listen "127.0.0.1:$new_port" --backend "127.0.0.1:$bport" 2>"$1"
		new_pid=$spawned
		until_true 10 started "$1" && return 0
		grep -q 'Address already in use' "$1" || break
		echo "rockd try $try: $(grep 'already in use' "$1"); again" >&2
	done
	sed 's/^/    /' "$1"
	return 1
}

# Log lines, after the time stamp and pid, equal to a string.
nlogged() { sed 's/^[^ ]* rockd\[[0-9]*\]: //' "$log" | grep -cFx -- "$1"; }
# shellcheck disable=SC2317 # run by until_true or t_check
logged() { [ "$(nlogged "$1")" -gt 0 ]; }
# at_least N LINE: LINE logged at least N times.
# shellcheck disable=SC2317 # run by until_true or t_check
at_least() { [ "$(nlogged "$2")" -ge "$1" ]; }
# t_logged NAME LINE [N]: LINE logged (at least N times), within 5 s.
t_logged() {
	if until_true 5 at_least "${3:-1}" "$2"; then
		t_ok "$1"
	else
		t_bad "$1: no line '$2' (x${3:-1}) in rockd's log"
	fi
}

# MARK LINE WHAT: how often LINE happened since log line MARK: the lines
# written, and those the budget for WHAT lines left out and counted.
ncounted() {
	local shown left
	shown=$(tail -n +"$(($1 + 1))" "$log" | sed 's/^[^ ]* rockd\[[0-9]*\]: //' | grep -cFx -- "$2")
	left=$(tail -n +"$(($1 + 1))" "$log" |
		sed -n "s/.*: info: log_limit: \([0-9]*\) more $3 lines left out in the last [0-9]* s\$/\1/p" |
		awk '{ n += $1 } END { print n + 0 }')
	echo $((shown + left))
}
# shellcheck disable=SC2317 # run by until_true
counted_reach() { [ "$(ncounted "$2" "$3" "$4")" -ge "$1" ]; }
# t_counted NAME LINE WHAT MARK N: LINE happened exactly N times since MARK,
# every count flushed (the budget's window is 10 s).
t_counted() {
	until_true 15 counted_reach "$5" "$4" "$2" "$3"
	t_eq "$1" "$(ncounted "$4" "$2" "$3")" "$5"
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$rockd_pid/status"; }
# t_bounded NAME: rockd alive, its RSS under the baseline + 64 MiB.
t_bounded() {
	local rss
	if ! kill -0 "$rockd_pid" 2>/dev/null; then
		t_bad "$1: rockd is gone"
		return
	fi
	t_ok "$1: rockd alive"
	rss=$(rss_kib)
	# AddressSanitizer's quarantine and shadow memory make RSS meaningless.
	if [ -n "${ROCK_SAN_PRELOAD:-}" ]; then
		t_skipped "$1: RSS not judged in a sanitizer build ($rss_base -> $rss KiB)"
		return
	fi
	t_check "$1: rockd's RSS bounded ($rss_base -> $rss KiB)" \
		test "$rss" -lt $((rss_base + RSS_GROWTH_KIB))
}

# attack NAME ARGS...: the tool, its one line shown; passes on exit 0.
attack() {
	local name=$1 rc
	shift
	"$HOSTILE" "$@" >"$t_tmp/$name.out" 2>"$t_tmp/$name.err"
	rc=$?
	if [ "$rc" = 0 ]; then
		t_ok "$(cat "$t_tmp/$name.out")"
	else
		t_bad "$name: exit $rc: $(cat "$t_tmp/$name.out" "$t_tmp/$name.err")"
	fi
}

# The last control channel drop counts logged: "total forged replayed unknown malformed".
drops() {
	sed -n 's/.*control channel: dropped \([0-9]*\) records so far (forged \([0-9]*\), replayed \([0-9]*\), unknown session \([0-9]*\), malformed \([0-9]*\))$/\1 \2 \3 \4 \5/p' \
		"$log" | tail -n 1 | grep . || echo 0 0 0 0 0
}

start_backend || { t_bad "echo backend starts"; t_done; }
log="$t_tmp/rockd.log"
start_rockd "$log" "$nofile" || { t_bad "rockd starts"; t_done; }
rockd_pid=$new_pid lport=$new_port
host=127.0.0.1
head -c 1048576 /dev/urandom >"$t_tmp/small"

# --- the legitimate stream: 256 KiB every 100 ms, echoed back, all along --
cat >"$t_tmp/producer.py" <<'EOF'
import os, sys, time
out, copy, finish, least = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sent, end = 0, time.time() + 50
with open(out, 'wb', buffering=0) as o, open(copy, 'wb') as c:
    while time.time() < end and (sent < least or not os.path.exists(finish)):
        b = os.urandom(256 * 1024)
        view = memoryview(b)
        while view:
            view = view[o.write(view):]
        c.write(b)
        sent += len(b)
        time.sleep(0.1)
EOF
mkfifo "$t_tmp/stream.in"
# Not through spawn: the child, not this shell, must open the fifo.
"$ROCKCAT" -r -s "$host" "$lport" <"$t_tmp/stream.in" >"$t_tmp/stream.out" \
	2>"$t_tmp/stream.err" &
stream_pid=$!
pids+=("$stream_pid")
spawn python3 "$t_tmp/producer.py" "$t_tmp/stream.in" "$t_tmp/stream.sent" \
	"$t_tmp/stream.finish" "$STREAM_MIN"
# shellcheck disable=SC2317 # run by until_true or t_check
stream_flowing() { [ -s "$t_tmp/stream.out" ]; }
if ! until_true 10 stream_flowing; then
	t_bad "the legitimate stream starts: $(cat "$t_tmp/stream.err")"
	t_done
fi
stream_id=$(sed -n 's/^rockcat: [0-9]* \([0-9a-f]\{8\}\) connected$/\1/p' "$t_tmp/stream.err")
t_check "the legitimate stream is a rock (id '$stream_id')" test -n "$stream_id"
rss_base=$(rss_kib)
stream_before=$(stat -c %s "$t_tmp/stream.out")

# --- 1. malformed, stale and truncated hellos -------------------------------
attack garbage garbage "$host" "$lport"
t_check "garbage: logged" logged "info: hello_complete: handshake: malformed hello; dropped"
attack stale stale "$host" "$lport"
t_check "stale: logged" logged \
	"info: hello_complete: handshake: announcement from another server instance; client told to probe again"
attack truncated truncated "$host" "$lport"
t_logged "truncated: logged" \
	"info: hello_failed: handshake: connection closed before the hello was complete (1055 of 1086 bytes); dropped"
if [ "$ROCK_LONG" = 1 ]; then
	attack truncated-wait truncated-wait "$host" "$lport"
	t_logged "truncated-wait: logged" \
		"info: hello_failed: handshake: timed out before the hello was complete (1055 of 1086 bytes); dropped"
else
	t_skipped "truncated-wait: the 10 s handshake timeout (ROCK_LONG=1 runs it)"
fi
t_bounded "after the bad hellos"

# --- 2. attacks on a live session of the tool's own -------------------------
wrong_key="info: reconnect_reject: reconnect rejected: wrong key"
no_session="info: reconnect_reject: reconnect rejected: no such session"
bad_request="info: reconnect_reject: reconnect rejected: malformed request"
replayed="info: reconnect_reject: reconnect rejected: an older attempt than the one in use"
overlapping="info: reconnect_reject: reconnect rejected: sent while the attempt in use was open"
n_wrong=$(nlogged "$wrong_key")
n_unknown=$(nlogged "$no_session")
n_bad_request=$(nlogged "$bad_request")
n_replayed=$(nlogged "$replayed")
n_overlapping=$(nlogged "$overlapping")
read -r d_all d_forged d_replayed d_unknown d_malformed < <(drops)
attack session session "$host" "$lport"
id=$(sed -n 's/^session: rock \([0-9a-f]\{8\}\): .*/\1/p' "$t_tmp/session.out")
t_check "session: id reported ('$id')" test -n "$id"
t_eq "session: a request with the wrong key refused as such" \
	$(($(nlogged "$wrong_key") - n_wrong)) 1
t_check "session: the legitimate reconnect logged" logged \
	"info: take_over: rock $id: client reconnected; resending from byte 4096"
t_eq "session: the replayed request refused as superseded" \
	$(($(nlogged "$replayed") - n_replayed)) 1
t_eq "session: an overlapping attempt refused as superseded" \
	$(($(nlogged "$overlapping") - n_overlapping)) 1
t_check "session: unknown id (and the ended session) refused" \
	test $(($(nlogged "$no_session") - n_unknown)) -ge 2
t_eq "session: malformed request refused" $(($(nlogged "$bad_request") - n_bad_request)) 1
t_logged "session: heartbeats dropped: 1 forged, 2 replayed, 1 unknown, 1 malformed" \
	"info: log_drops: control channel: dropped $((d_all + 5)) records so far (forged $((d_forged + 1)), replayed $((d_replayed + 2)), unknown session $((d_unknown + 1)), malformed $((d_malformed + 1)))"
t_check "session: ended cleanly" logged "info: on_rock_state: rock $id: CONNECTED -> CLOSED (both ends closed)"
t_eq "session: never closed on error" "$(grep -c "rock $id: closed: " "$log")" 0
t_bounded "after the session attacks"

# --- 3. half-open handshakes ------------------------------------------------
closed8="info: hello_failed: handshake: connection closed before the hello was complete (8 of 1086 bytes); dropped"
# halfopen N EXPECT: the tool holds N connections until fd 3 closes.
halfopen_start() {
	mkfifo "$t_tmp/hold.$1"
	"$HOSTILE" halfopen "$host" "$lport" "$1" "$2" <"$t_tmp/hold.$1" \
		>"$t_tmp/halfopen.$1.out" 2>"$t_tmp/halfopen.$1.err" &
	halfopen_pid=$!
	pids+=("$halfopen_pid")
	exec 3>"$t_tmp/hold.$1"
}
# shellcheck disable=SC2317 # run by until_true or t_check
reported() { [ -s "$1" ]; }
if [ "$nofile" -ge $((MAX_HANDSHAKES + 1000)) ]; then
	mark=$(wc -l <"$log") mark3=$mark
	halfopen_start "$HALFOPEN" "$HALFOPEN"
	until_true 20 reported "$t_tmp/halfopen.$HALFOPEN.out"
	t_check "$(cat "$t_tmp/halfopen.$HALFOPEN.out")" \
		grep -q "^halfopen: $HALFOPEN of $HALFOPEN connections .* still open" \
		"$t_tmp/halfopen.$HALFOPEN.out"
	timeout 15 "$ROCKCAT" -r "$host" "$lport" <"$t_tmp/small" >"$t_tmp/small.out" \
		2>"$t_tmp/small.err"
	t_eq "during $HALFOPEN half-open handshakes: a new rockcat exits 0" $? 0
	t_check "during $HALFOPEN half-open handshakes: its 1 MiB echoed exactly" \
		cmp -s "$t_tmp/small" "$t_tmp/small.out"
	t_bounded "during $HALFOPEN half-open handshakes"
	exec 3>&-
	wait "$halfopen_pid"
	t_eq "halfopen: the tool exits 0" $? 0
	t_counted "halfopen: all $HALFOPEN logged or counted once closed" "$closed8" \
		"failed handshake" "$mark" "$HALFOPEN"

	# Beyond the bound, rockd refuses new handshakes and keeps serving.
	mark=$(wc -l <"$log")
	over=$((MAX_HANDSHAKES + 104))
	halfopen_start "$over" "$MAX_HANDSHAKES"
	until_true 20 reported "$t_tmp/halfopen.$over.out"
	t_check "$(cat "$t_tmp/halfopen.$over.out")" \
		grep -q "^halfopen: $MAX_HANDSHAKES of $over connections .* still open" \
		"$t_tmp/halfopen.$over.out"
	refusal="warning: to_rock: $MAX_HANDSHAKES handshakes in progress: refusing another"
	t_counted "bound: each refusal logged or counted" "$refusal" refusal "$mark" 104
	t_bounded "with $MAX_HANDSHAKES half-open handshakes"
	exec 3>&-
	wait "$halfopen_pid"
	t_eq "bound: the tool exits 0" $? 0
	t_counted "bound: all $MAX_HANDSHAKES logged or counted once closed" "$closed8" \
		"failed handshake" "$mark" "$MAX_HANDSHAKES"
	t_check "strangers' lines kept to their budget (20 per 10 s of each kind)" \
		test "$(tail -n +"$((mark3 + 1))" "$log" | grep -c -e 'hello_failed:' -e 'to_rock:')" -le 200
else
	t_skipped "half-open handshakes: ulimit -n is $nofile, below $((MAX_HANDSHAKES + 1000))"
fi

# --- 4. resource exhaustion: each expects what doc/PROTOCOL.md promises ----
# On a second rockd with the usual default of 1024 descriptors, so that the
# first one's checks stay meaningful.
if [ "$ROCK_EXHAUST" = 1 ] && start_rockd "$t_tmp/weak.log" 1024; then
	attack slowloris slowloris "$host" "$new_port"
	if [ -n "${ROCK_SAN_PRELOAD:-}" ]; then
		t_skipped "greedy: judged by RSS, meaningless in a sanitizer build"
	else
		attack greedy greedy "$host" "$new_port" 256 "$new_pid"
	fi
	attack abandon abandon "$host" "$new_port" 600
	sleep 3	# past the 2.5 s of silence that suspends them
	timeout 15 "$ROCKCAT" "$host" "$new_port" <"$t_tmp/small" >"$t_tmp/weak.out" \
		2>"$t_tmp/weak.err"
	t_check "abandon: rockd still serves a new client ($(cat "$t_tmp/weak.err"))" \
		cmp -s "$t_tmp/small" "$t_tmp/weak.out"
	kill -KILL "$new_pid"
elif [ "$ROCK_EXHAUST" = 1 ]; then
	t_bad "a second rockd starts"
else
	t_skipped "resource exhaustion: slowloris, greedy, abandon (ROCK_EXHAUST=0)"
fi

# --- 5. the legitimate stream never noticed ----------------------------------
t_check "the stream kept flowing during the attacks" \
	test "$(stat -c %s "$t_tmp/stream.out")" -gt "$stream_before"
touch "$t_tmp/stream.finish"
# shellcheck disable=SC2317 # run by until_true or t_check
gone() { ! kill -0 "$1" 2>/dev/null; }
if until_true 30 gone "$stream_pid"; then
	wait "$stream_pid"
	t_eq "the stream's rockcat exits 0" $? 0
else
	t_bad "the stream's rockcat ends: still running 30 s after its input did"
fi
t_check "the stream carried at least 20 MiB" test "$(stat -c %s "$t_tmp/stream.sent")" -ge "$STREAM_MIN"
t_eq "the stream came back byte-exact" "$(sha256sum <"$t_tmp/stream.out")" \
	"$(sha256sum <"$t_tmp/stream.sent")"
t_eq "the stream's states: up, connected, closed, nothing between" \
	"$(sed 's/^rockcat: [0-9]* [0-9a-f]* //' "$t_tmp/stream.err" | tr '\n' ,)" \
	"SUSPENDED -> CONNECTED,connected,CONNECTED -> CLOSED,"
t_eq "rockd never suspended the stream" \
	"$(grep -c "rock $stream_id: CONNECTED -> SUSPENDED" "$log")" 0

t_bounded "at the end"
t_eq "no sanitizer report or broken invariant in rockd's log" \
	"$(grep -c -e 'Sanitizer' -e 'runtime error' -e 'invariant broken' "$log")" 0
kill -TERM "$rockd_pid"
if until_true 5 gone "$rockd_pid"; then
	wait "$rockd_pid"
	t_eq "rockd exits 0 on SIGTERM at once: no session left behind" $? 0
else
	t_bad "rockd exits on SIGTERM at once: still running after 5 s"
fi
t_done
