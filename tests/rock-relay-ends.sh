#!/usr/bin/env bash
# rock-relay-ends.sh: how a relayed rock (stdio here; fork and exec use the same relay) ends, on loopback: the peer's last bytes wait for a slow reader after both ends have passed, and a close with unread input after the rock held the relay back is a reset at the peer, never a clean end short of what was written.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
ROCK="$top_builddir/tools/rock"
IO="$top_builddir/tests/rock-io"
t_kill_on_exit
command -v socat >/dev/null || t_skip_all "socat not found"
[ -x "$IO" ] || t_skip_all "tests/rock-io not built"

# NAME BACKEND_COMMAND: a backend running the command per connection and
# a rockd in front of it; sets port.
serve() {
	local be
	be=$(free_port) port=$(free_port)
	socat "TCP4-LISTEN:$be,bind=127.0.0.1,reuseaddr,fork" SYSTEM:"$2" 2>/dev/null &
	pids+=($!)
	printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$be" >"$t_tmp/$1.conf"
	"$ROCKD" -F -v -f "$t_tmp/$1.conf" 2>"$t_tmp/$1.rockd.log" &
	pids+=($!)
	rockd_started "$t_tmp/$1.rockd.log" "${pids[-1]}" && return 0
	t_bad "$1: rockd did not start within 20 s: $(tail -n 3 "$t_tmp/$1.rockd.log" | tr '\n' ' ')"
	t_done
}
# NAME MODE BYTES: rock-io under rock.
client() {
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$1.log" timeout 60 "$ROCK" "$IO" "$2" 127.0.0.1 "$port" "$3" \
		>"$t_tmp/$1.out" 2>&1
}

# --- the peer's 8 MB and its end reach a reader that waits 2 s -----------
bytes=8000000
serve tail "cat >/dev/null; head -c $bytes /dev/zero"
client tail stdio-tail "$bytes"
t_eq "slow reader: exit status" "$?" 0
t_eq "slow reader: every byte, then the end" "$(cat "$t_tmp/tail.out")" "stdio-tail: $bytes bytes, then the end"
t_check "slow reader: the rock was relayed for stdio" grep -q ': a rock$' "$t_tmp/tail.log"

# --- a close with the greeting unread: a reset at the peer, never an end --
# NAME BYTES WHAT BACKEND: BYTES written (0: until the rock holds them back).
abortive() {
	serve "$1" "$4"
	client "$1" stdio-abort "$2"
	t_eq "$3: exit status" "$?" 0
	t_check "$3: the client wrote, then closed" \
		grep -q 'stdio-abort: [0-9]* bytes written, then closed unread' "$t_tmp/$1.out"
	for _ in $(seq 100); do grep -q 'CONNECTED -> CLOSED' "$t_tmp/$1.rockd.log" && break; sleep 0.1; done
	t_check "$3: rockd heard a reset" grep -q 'CONNECTED -> CLOSED (the peer reset it)' "$t_tmp/$1.rockd.log"
	t_eq "$3: rockd never saw a clean end" "$(grep -c "peer's end of stream" "$t_tmp/$1.rockd.log")" 0
}
abortive held 0 "abortive close, the rock holding the relay back" "echo hello; sleep 4; cat >/dev/null"
abortive behind 4000000 "abortive close, the relay behind the writer" "echo hello; cat >/dev/null"
t_done
