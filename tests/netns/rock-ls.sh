#!/usr/bin/env bash
# rock-ls.sh: rock ls lists a program's 3 rocks and rockd's sessions with their states through a blackhole; rock kill ends one with ECONNRESET (client side and rockd's) while the others stream on byte-exact.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
command -v python3 >/dev/null || t_skip_all "python3 not installed"
rock_netns_up

CTL="$t_tmp/rockd/control"
mkdir -m 0700 "$t_tmp/rockd"
nn_s socat -t 60 "TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork" EXEC:cat 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 || t_skip_all "the echo backend did not start"
nn_s "$ROCKD" -F -v -p "$t_tmp/rockd.pid" --control "$CTL" --listen 7001 \
	--backend 127.0.0.1:9000 2>>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 7001 20 || t_fail_all "rockd did not listen"
t_eq "rockd's control socket is owner-only" "$(stat -c %a "$CTL")" 600
# A second rockd at the same control socket: refused, the first keeps it.
# (on 7101: the first's workers hold UDP 7001 up, one port each)
nn_s timeout 5 "$ROCKD" -F --control "$CTL" --listen 7101 --backend 127.0.0.1:9000 2>"$t_tmp/second.log"
t_eq "a second rockd at a live control socket: exit 1" $? 1
t_check "and says why" grep -q "control $CTL: in use by another process\$" "$t_tmp/second.log"
t_check "the first one's socket is still there" test -S "$CTL"

mkfifo "$t_tmp/rounds.in"
exec {rounds_fd}<>"$t_tmp/rounds.in"
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/client.log" t_foreign nn_c "$ROCK" "$TRAFFIC" rounds "$NN_S_ADDR" 7001 3 65536 \
	<"$t_tmp/rounds.in" >"$t_tmp/rounds.out" 2>"$t_tmp/rounds.err" &
pids+=($!)
answers() { [ "$(grep -c . "$t_tmp/rounds.out")" -ge "$1" ]; }
# N: a round: one line in, N answers out.
round() {
	local want=$(($(grep -c . "$t_tmp/rounds.out") + $1))
	echo go >&"$rounds_fd"
	wait_for 10 answers "$want"
}
round 3
t_eq "3 rocks echo a round" "$(grep -c 'round 0 conn [0-2] ok' "$t_tmp/rounds.out")" 3

# FIELD=VALUE... of rock ls --json's rows of SOURCE, one line each, sorted.
rows() {
	local src=$1
	shift
	"$ROCK" ls --json --rockd "$CTL" | python3 -c '
import json, sys
src, keys = sys.argv[1], sys.argv[2:]
for r in json.load(sys.stdin):
    if r["source"] == src:
        print(" ".join("%s=%s" % (k, r[k]) for k in keys))' "$src" "$@" | sort
}
all_in() { [ "$(rows "$1" state | grep -c "state=$2")" -eq 3 ]; }
sockets=$(find "$XDG_RUNTIME_DIR/rock" -name 'ctl.*' -type s | wc -l)
t_eq "one control socket in the runtime directory" "$sockets" 1
t_eq "its mode is 0600" "$(stat -c %a "$XDG_RUNTIME_DIR"/rock/ctl.*)" 600
want_c=$(printf 'program=traffic role=client peer=%s:7001 state=CONNECTED reconnects=0\n' "$NN_S_ADDR"{,,})
t_eq "rock ls --json: the program's 3 rocks" "$(rows process program role peer state reconnects)" "$want_c"
want_s=$(printf 'program=rockd role=server backend=127.0.0.1:9000 state=CONNECTED\n%.0s' 1 2 3)
t_eq "rock ls --json: rockd's 3 sessions" "$(rows rockd program role backend state)" "$want_s"
t_eq "the same ids on both sides" "$(rows process id)" "$(rows rockd id)"
t_check "rockd's peers are the client's address" \
	test "$(rows rockd peer | grep -c "peer=$NN_C_ADDR:")" -eq 3
t_check "the table has a header and 6 rows" \
	test "$("$ROCK" ls --rockd "$CTL" | awk 'NR == 1 && $1 == "ID" { h = 1 } END { print h + 0, NR }')" = "1 7"

nn_blackhole
t_check "during a blackhole the program's rocks are SUSPENDED" wait_for 10 all_in process SUSPENDED
t_check "and rockd's sessions too" wait_for 10 all_in rockd SUSPENDED
nn_restore
t_check "after it, the program's rocks are CONNECTED again" wait_for 10 all_in process CONNECTED
t_check "and rockd's" wait_for 10 all_in rockd CONNECTED
t_eq "each counts one reconnect" "$(rows process reconnects | sort -u)" "reconnects=1"
round 3
t_eq "3 rocks echo a round after it" "$(grep -c 'round 1 conn [0-2] ok' "$t_tmp/rounds.out")" 3

# rock kill at the client: that rock's next call fails with ECONNRESET.
victim=$(rows process id | head -n 1 | sed 's/^id=//')
t_eq "rock kill $victim" "$("$ROCK" kill "$victim" 2>&1; echo "rc=$?")" "rc=0"
round 3
t_eq "the killed rock's next call: ECONNRESET" "$(grep -c 'round 2 conn [0-2] error ECONNRESET' "$t_tmp/rounds.out")" 1
t_eq "the other two echo on" "$(grep -c 'round 2 conn [0-2] ok' "$t_tmp/rounds.out")" 2
t_check "rockd ends that session and resets its backend" wait_for 5 \
	grep -q "rock $victim: ended (.*); resetting its backend" "$t_tmp/rockd.log"
two_each() { [ "$(rows process id | wc -l) $(rows rockd id | wc -l)" = "2 2" ]; }
t_check "rock ls lists 2 at each end" wait_for 5 two_each
t_eq "rock kill of an unknown id fails" "$("$ROCK" kill "$victim" 2>&1; echo "rc=$?")" \
	"rock kill: no rock $victim
rc=1"

# rock kill at rockd (the program's sockets out of sight), the id in
# upper case.
victim=$(rows rockd id | head -n 1 | sed 's/^id=//')
upper=$(printf %s "$victim" | tr a-f A-F)
t_eq "rock kill --rockd $upper" "$(XDG_RUNTIME_DIR="$t_tmp/none" "$ROCK" kill --rockd "$CTL" "$upper" 2>&1; echo "rc=$?")" "rc=0"
t_check "rockd resets that backend, saying it was killed" wait_for 5 \
	grep -q "rock $victim: ended (killed (rock kill)); resetting its backend" "$t_tmp/rockd.log"
one_left() { [ "$(rows process id | wc -l)" -eq 1 ]; }
t_check "the program's rock learns it" wait_for 5 one_left
round 2
t_eq "that rock's next call: ECONNRESET" "$(grep -c 'round 3 conn [0-2] error ECONNRESET' "$t_tmp/rounds.out")" 1
t_eq "the last one echoes on" "$(grep -c 'round 3 conn [0-2] ok' "$t_tmp/rounds.out")" 1
t_eq "--rockd at a missing socket is an error" \
	"$("$ROCK" ls --rockd "$t_tmp/missing" 2>&1 >/dev/null; echo "rc=$?")" \
	"rock ls: $t_tmp/missing: No such file or directory
rc=1"

# A hand-over (SIGUSR2): the successor answers at the same socket.
pid1=$(cat "$t_tmp/rockd.pid")
successor() { [ "$(cat "$t_tmp/rockd.pid")" != "$pid1" ] && ! nn_s kill -0 "$pid1" 2>/dev/null; }
nn_s kill -USR2 "$pid1"
t_check "rockd hands over" wait_for 10 successor
pids+=("$(cat "$t_tmp/rockd.pid")")
t_eq "its successor lists the last session" "$(rows rockd program state)" "program=rockd state=CONNECTED"
t_eq "at the same socket, still owner-only" "$(stat -c %a "$CTL")" 600
t_done
