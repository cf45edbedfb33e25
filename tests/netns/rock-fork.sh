#!/usr/bin/env bash
# rock-fork.sh: a rock that fork() shares or exec passes on stays one byte-exact stream through RSTs, a 15 s blackhole and a client address change: the child writes and the parent reads, the reverse, a parent that exits at once, by exit() or inside daemon(3) (ssh -f), leaves its child a live rock, and a new image reads and writes the rock it inherits, with librock or without; a plain connection is the control.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
ECHOD="$top_builddir/tests/echod"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] && [ -x "$ECHOD" ] ||
	t_skip_all "rockd, tests/traffic or tests/echod not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
rock_netns_up
nn_on_cleanup stop_detached

LEN=65536
FORKS="child parent detach daemon"
EXECS="exec exec_bare"
CLIENTS="$FORKS $EXECS"
rtt=$(nn_profile_rtt_ms "${NN_PROFILE:-lan}")
slow=$((10 + rtt / 20)) # seconds a burst may take on this path, faults aside

# shellcheck disable=SC2317 # run by nn_cleanup
stop_detached() { pkill -f "traffic (forked $NN_S_ADDR|inherited)" 2>/dev/null; }

nn_s "$ECHOD" 9000 &
pids+=($!)
nn_s socat "TCP4-LISTEN:9001,bind=$NN_S_ADDR,reuseaddr,fork" EXEC:cat 2>/dev/null &
pids+=($!)
nn_s "$ROCKD" -F -v --listen 7001 --backend 127.0.0.1:9000 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 && nn_wait_port "$NN_S" "$NN_S_ADDR" 9001 5 &&
	nn_wait_port "$NN_S" "$NN_S_ADDR" 7001 5 || t_skip_all "the servers did not start"

# NAME PORT WHO [rock]: a `traffic forked` client reading its bursts from
# NAME.in. Every client opens its fifo before the test holds any (so none
# inherits another's writer and each sees its end of file).
start_client() {
	local name=$1 port=$2 who=$3
	mkfifo "$t_tmp/$name.in"
	if [ "${4:-}" = rock ]; then
		ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$name.log" t_foreign nn_c "$ROCK" "$TRAFFIC" forked \
			"$NN_S_ADDR" "$port" "$LEN" "$who" <"$t_tmp/$name.in" >"$t_tmp/$name.out" 2>&1 &
	else
		t_foreign nn_c "$TRAFFIC" forked "$NN_S_ADDR" "$port" "$LEN" "$who" \
			<"$t_tmp/$name.in" >"$t_tmp/$name.out" 2>&1 &
	fi
	eval "${name}_pid=\$!"
	pids+=($!)
}
for c in $CLIENTS; do start_client "$c" 7001 "${c/_/-}" rock; done
start_client plain 9001 child
# A rock that closes on exec: the exec is its close, finished as at exit.
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/exec_closed.log" t_foreign nn_c "$ROCK" "$TRAFFIC" forked \
	"$NN_S_ADDR" 7001 "$LEN" exec-closed </dev/null >"$t_tmp/exec_closed.out" 2>&1 &
pids+=($!)
for c in $CLIENTS plain; do
	exec {fd}>"$t_tmp/$c.in"
	eval "${c}_fd=\$fd"
done
# NAMES...: one burst each.
burst() { local c fd; for c in "$@"; do eval "fd=\$${c}_fd"; echo go >&"$fd"; done; }
# N TIMEOUT_S NAMES...: wait until each has echoed burst N.
echoed() {
	local n=$1 s=$2 c
	shift 2
	for c in "$@"; do wait_for "$s" grep -q "burst $n ok" "$t_tmp/$c.out" || return 1; done
}
check_burst() {
	local c
	for c in $CLIENTS; do
		t_check "$1: $c: burst $2 echoed byte-exact" grep -q "burst $2 ok" "$t_tmp/$c.out"
	done
}

burst $CLIENTS plain
echoed 0 "$slow" $CLIENTS plain
check_burst "before any fault" 0
images=$(pgrep -d, -f '[t]raffic inherited')
t_eq "exec: the keepers are no new image's children" "$(pgrep -P "${images:-0}" | wc -l)" 0
sleep 2 # heartbeats prove the rocks

# ---- RSTs: the router answers every TCP segment with a reset -------------
nn_rst_inject both
burst $CLIENTS plain
nap 2
nn_restore
echoed 1 $((slow + 20)) $CLIENTS
check_burst "through RSTs" 1
wait_for "$slow" grep -q "error\|reset" "$t_tmp/plain.out"
t_check "control: the plain connection was reset ($(tr '\n' ' ' <"$t_tmp/plain.out"))" \
	grep -q "error Connection reset" "$t_tmp/plain.out"

# ---- a 15 s blackhole with a burst in flight ------------------------------
nn_blackhole both
burst $CLIENTS
nap 15
nn_restore
echoed 2 $((slow + 30)) $CLIENTS
check_burst "through a 15 s blackhole" 2

# ---- the client's address changes -----------------------------------------
nn_change_client_addr >/dev/null
burst $CLIENTS
echoed 3 $((slow + 30)) $CLIENTS
check_burst "after an address change" 3

# ---- the ends -------------------------------------------------------------
for c in $CLIENTS plain; do
	eval "fd=\$${c}_fd"
	exec {fd}>&-
done
# NAME: wait for that client to exit; its status in rc (124: still running).
client_exit() {
	local pid
	eval "pid=\$${1}_pid"
	if wait_pid "$pid" $((slow + 20)); then rc=$waited; else rc=124; fi
}
for c in child parent; do
	client_exit "$c"
	t_eq "$c writes: both processes exited 0 ($(tail -n 2 "$t_tmp/$c.out" | tr '\n' ' '))" "$rc" 0
	t_check "$c writes: the reader read all $((4 * LEN)) bytes, then the end" \
		grep -qx "end $((4 * LEN)) bytes" "$t_tmp/$c.out"
done
for c in detach daemon; do
	wait_for $((slow + 20)) sh -c "! pgrep -f '[t]raffic forked $NN_S_ADDR 7001 $LEN $c' >/dev/null"
	t_check "$c: the child finished and exited" \
		sh -c "! pgrep -f '[t]raffic forked $NN_S_ADDR 7001 $LEN $c' >/dev/null"
	t_check "$c: the parent's exit left the rock to a keeper" grep -q "keeper .*: finishing" "$t_tmp/$c.log"
done
for c in $EXECS; do
	client_exit "$c"
	t_eq "$c: the new image ran every burst and exited 0 ($(tail -n 1 "$t_tmp/$c.out"))" "$rc" 0
	t_check "$c: the rock went to the new image through a keeper's relay" \
		grep -q "exec: 1 rocks passed to the new image, relayed by a keeper" "$t_tmp/$c.log"
done
t_check "exec-closed: rockd had all $LEN bytes, then the rock's end" \
	grep -q "peer's end of stream after $LEN bytes" "$t_tmp/rockd.log"
wait_for 10 test "$(grep -c 'on_rock_closed: rock [0-9a-f]*: both ends closed' "$t_tmp/rockd.log")" -ge 7
t_eq "rockd: the seven rocks ended, closed by both ends" \
	"$(grep -c 'on_rock_closed: rock [0-9a-f]*: both ends closed' "$t_tmp/rockd.log")" 7
for c in $FORKS; do
	t_check "$c: its rock was relayed for the fork" grep -q "fork: 1 rocks shared with the child" "$t_tmp/$c.log"
done
t_eq "no rock was reset or cut short" \
	"$(for c in $CLIENTS; do cat "$t_tmp/$c.out"; done |
		grep -c -i 'error\|MISMATCH\|end of stream after')" 0
echo "measured: data connections per rock in rockd (the first included):" \
	"$(grep 'on_rock_state: .*SUSPENDED -> CONNECTED' "$t_tmp/rockd.log" | grep -o 'rock [0-9a-f]*' |
		sort | uniq -c | awk '{ print $1 }' | tr '\n' ' ')"
t_done
