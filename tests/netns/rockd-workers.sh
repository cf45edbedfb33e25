#!/usr/bin/env bash
# rockd-workers.sh: rockd with 2 workers: 16 rocks from two client addresses, each address's on one worker (steered by address); a blackhole keeps them on their worker, a new client address sends them to the other, which passes them to the one holding them, byte-exact; one metrics endpoint and one control socket (rock ls, rock kill) cover both; USR2 hands every worker's rocks to a new master's; a killed worker's rocks end with ECONNRESET, the others echo on; SIGTERM stops all.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
command -v python3 >/dev/null || t_skip_all "python3 not installed"
command -v curl >/dev/null || t_skip_all "curl not installed"
rock_netns_up

N=16
log="$t_tmp/rockd.log"
nn_s socat -t 60 "TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork" EXEC:cat 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 || t_skip_all "the echo backend did not start"
CTL="$t_tmp/rockd/control"
mkdir -m 0700 "$t_tmp/rockd"
nn_s "$ROCKD" -F -v --workers 2 -p "$t_tmp/rockd.pid" --key "$t_tmp/key" \
	--metrics 127.0.0.1:9187 --control "$CTL" --listen 7000 \
	--backend 127.0.0.1:9000 2>"$log" &
pids+=($!)
if ! wait_for 20 grep -q ' 2 workers started$' "$log"; then
	t_bad "rockd with 2 workers started (log: $(tail -n 5 "$log"))"
	t_done
fi
t_ok "rockd with 2 workers started"
# PID of worker K, from its latest "worker K started" line.
worker_pid() { sed -n "s/.* rockd\[\([0-9]*\)\]: info: run: .* worker $1 started\$/\1/p" "$log" | tail -n 1; }
w0=$(worker_pid 0) w1=$(worker_pid 1)
master=$(cat "$t_tmp/rockd.pid")
t_eq "the pidfile names the workers' parent" \
	"$(ps -o ppid= -p "$w0" | tr -d ' ') $(ps -o ppid= -p "$w1" | tr -d ' ')" "$master $master"
t_eq "two listeners on port 7000, one per worker" \
	"$(nn_s ss -Hltn 'sport = :7000' | wc -l)" 2
t_check "worker 0's control channel: UDP 7000" eval \
	"nn_s ss -Hlunp 'sport = :7000' | grep -q 'pid=$w0,'"
t_check "worker 1's control channel: UDP 7001" eval \
	"nn_s ss -Hlunp 'sport = :7001' | grep -q 'pid=$w1,'"

# Two clients of N/2 rocks each: A in the client namespace, whose path
# the faults and the profile act on, and B in the router, whose own
# traffic they do not touch. Their addresses, 198.51.100.2 and
# 203.0.113.1, are even and odd: the steering (the source address mod
# the workers) sends them to different listeners.
mkfifo "$t_tmp/rounds.in" "$t_tmp/roundsb.in"
exec {rounds_fd}<>"$t_tmp/rounds.in" {roundsb_fd}<>"$t_tmp/roundsb.in"
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/client.log" t_foreign nn_c "$ROCK" "$TRAFFIC" rounds \
	"$NN_S_ADDR" 7000 $((N / 2)) 8192 <"$t_tmp/rounds.in" >"$t_tmp/rounds.out" \
	2>"$t_tmp/rounds.err" &
pids+=($!)
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/clientb.log" t_foreign nn_r "$ROCK" "$TRAFFIC" rounds \
	"$NN_S_ADDR" 7000 $((N / 2)) 8192 <"$t_tmp/roundsb.in" >"$t_tmp/roundsb.out" \
	2>"$t_tmp/roundsb.err" &
pids+=($!)
outs() { cat "$t_tmp/rounds.out" "$t_tmp/roundsb.out"; }
answers() { [ "$(outs | grep -c .)" -ge "$1" ]; }
# SECONDS [ANSWERS]: a round: one line in to each client, ANSWERS (N) out.
round() {
	local want=$(($(outs | grep -c .) + ${2:-N}))
	echo go >&"$rounds_fd"
	echo go >&"$roundsb_fd"
	wait_for "$1" answers "$want"
}
round 60
t_eq "$N rocks echo a round" "$(outs | grep -c "round 0 conn [0-9]* ok")" "$N"
# PEER PID of each connection rockd holds on port 7000 (an IPv6 listener
# shows IPv4 peers as [::ffff:A]).
conns() {
	nn_s ss -Htnp state established '( sport = :7000 )' |
		sed -n 's/.* \[*\(::ffff:\)*\([0-9.]*\)\]*:[0-9]* *users:((".*",pid=\([0-9]*\),.*/\2 \3/p'
}
conns >"$t_tmp/conns"
t_eq "steering: each client address's rocks on one worker, the two on different workers" \
	"$(sort -u "$t_tmp/conns" | awk '{ print $1 }' | tr '\n' ' ')/$(awk '{ print $2 }' "$t_tmp/conns" | sort -u | wc -l)" \
	"$NN_C_ADDR 203.0.113.1 /2"
t_eq "steering: $((N / 2)) rocks from each address" \
	"$(awk '{ print $1 }' "$t_tmp/conns" | sort | uniq -c | awk '{ print $1 }' | tr '\n' ' ')" \
	"$((N / 2)) $((N / 2)) "

# Each rock's name is its id's first 4 bytes in hex; the second byte is
# its worker's number. PID NAME per rock, from "client connected".
owners() { sed -n 's/.* rockd\[\([0-9]*\)\]: info: [a-z_]*: rock \([0-9a-f]*\): client connected.*/\1 \2/p' "$log"; }
t_eq "$N rocks made" "$(owners | wc -l)" "$N"
t_eq "both workers hold rocks" "$(owners | awk '{ print $1 }' | sort -u | wc -l)" 2
t_eq "each rock's id names the worker that made it" "$(owners | awk -v w0="$w0" -v w1="$w1" '
	($1 == w0 && substr($2, 3, 2) != "00") || ($1 == w1 && substr($2, 3, 2) != "01") { bad++ }
	END { print bad + 0 }')" 0

# ---- a blackhole, then a new client address: every rock reconnects ----
nn_blackhole both
nap 4
nn_restore
wait_for 60 eval '[ "$(grep -c "client reconnected" "$log")" -ge $((N / 2)) ]' ||
	t_bad "A's rocks reconnected after the blackhole"
t_eq "from an unchanged address, every reconnect reached its own worker: none passed" \
	"$(grep -c 'reconnect for worker [01]: passed to it' "$log")" 0
nn_change_client_addr >/dev/null
wait_for 60 eval '[ "$(grep -c "client reconnected" "$log")" -ge "$N" ]' ||
	t_bad "A's rocks reconnected after the address change"
round 60
t_eq "$N rocks echo after a blackhole and a new address" \
	"$(outs | grep -c "round 1 conn [0-9]* ok")" "$N"
passed=$(grep -c 'reconnect for worker [01]: passed to it' "$log")
t_check "from the new address ($NN_C_ADDR, odd), A's reconnects reached the other worker and were passed to theirs ($passed)" \
	test "$passed" -ge $((N / 2))
# PID NAME of every "client reconnected" line: the pid that made NAME.
t_eq "every reconnect resumed in the worker that holds its rock" "$(
	sed -n 's/.* rockd\[\([0-9]*\)\]: info: [a-z_]*: rock \([0-9a-f]*\): client reconnected.*/\1 \2/p' "$log" |
	awk 'NR == FNR { own[$2] = $1; next } own[$2] != $1 { bad++ } END { print bad + 0 }' <(owners) -)" 0
# (SUPERSEDED is a client's own older attempt; UNKNOWN or AUTH would be
# a worker that does not hold the rock)
t_check "no reconnect refused as unknown or unproven" eval \
	'! grep -Eq "reconnect rejected: (no such session|wrong key)" "$log"'

# ---- one metrics endpoint: every family has each worker's sample ----
# (the other worker's figures are at most half a second old)
nap 1
nn_s curl -s --max-time 5 http://127.0.0.1:9187/metrics >"$t_tmp/metrics" ||
	t_bad "the metrics endpoint answers"
# NAME [LABEL]: the sum over workers of a sample.
msum() { awk -v n="$1" -v l="${2:-}" 'index($1, n "{") == 1 && index($1, l) { s += $2 } END { print s + 0 }' "$t_tmp/metrics"; }
t_eq "metrics: each family once, samples of both workers" "$(awk '
	/^# TYPE/ { types[$3]++ } !/^#/ { name = $1; sub(/\{.*/, "", name)
		if ($1 ~ /worker="0"/) w0[name] = 1; else if ($1 ~ /worker="1"/) w1[name] = 1; else bad++ }
	END { for (t in types) if (types[t] != 1 || !(t in w0) || !(t in w1)) bad++; print length(types), bad + 0 }' "$t_tmp/metrics")" "18 0"
t_eq "metrics: $N connected sessions over both workers" "$(msum rockd_sessions 'state="connected"')" "$N"
t_eq "metrics: the routed reconnects, as logged" "$(msum rockd_reconnects_routed_total)" "$passed"
t_check "metrics: at least $N reconnects taken over" \
	test "$(msum rockd_reconnects_total)" -ge "$N"

# ---- rock ls and rock kill: worker 0's control socket answers for both ----
# ID PID STATE of rockd's sessions, sorted.
ls_rockd() {
	XDG_RUNTIME_DIR="$t_tmp/none" "$ROCK" ls --json --rockd "$CTL" | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r["source"] == "rockd":
        print(r["id"], r["pid"], r["state"])' | sort
}
ls_rockd >"$t_tmp/ls"
t_eq "rock ls: $N sessions, every one CONNECTED" "$(grep -c ' CONNECTED$' "$t_tmp/ls")" "$N"
t_eq "rock ls: rows from both workers" "$(awk '{ print $2 }' "$t_tmp/ls" | sort -u | tr '\n' ' ')" \
	"$(printf '%s\n' "$w0" "$w1" | sort | tr '\n' ' ')"
t_eq "rock ls: each row from the worker that holds it" "$(awk '{ print $1, $2 }' "$t_tmp/ls")" \
	"$(owners | awk '{ print $2, $1 }' | sort)"
victim=$(awk -v w="$w1" '$2 == w { print $1; exit }' "$t_tmp/ls")
t_eq "rock kill --rockd $victim, a worker 1 rock, through worker 0's socket" \
	"$(XDG_RUNTIME_DIR="$t_tmp/none" "$ROCK" kill --rockd "$CTL" "$victim" 2>&1; echo "rc=$?")" "rc=0"
t_check "worker 1 ends it" wait_for 5 \
	grep -q "rockd\[$w1\]: info: [a-z_]*: rock $victim: ended (killed (rock kill))" "$log"
round 60
t_eq "the killed rock's next call: ECONNRESET" \
	"$(outs | grep -c "round 2 conn [0-9]* error ECONNRESET")" 1
t_eq "the other $((N - 1)) echo on" "$(outs | grep -c "round 2 conn [0-9]* ok")" "$((N - 1))"
live_a=$(grep -c "round 2 conn [0-9]* ok" "$t_tmp/rounds.out")
t_eq "rock kill of an id no worker holds fails" \
	"$(XDG_RUNTIME_DIR="$t_tmp/none" "$ROCK" kill --rockd "$CTL" "$victim" 2>&1; echo "rc=$?")" \
	"rock kill: no rock $victim here nor at rockd
rc=1"

# ---- USR2: each worker hands its rocks over to a new master's worker ----
kill -USR2 "$master"
wait_for 20 grep -q "rockd\[$master\]: info: rockd_workers_run: handed over; exiting" "$log" ||
	t_bad "USR2: the old master says it handed over"
t_check "USR2: the old master exits" wait_for 10 eval "! kill -0 $master 2>/dev/null"
old0=$w0 old1=$w1 master=$(cat "$t_tmp/rockd.pid")
w0=$(worker_pid 0) w1=$(worker_pid 1)
t_eq "USR2: the pid file names the new master, the new workers' parent" \
	"$(ps -o ppid= -p "$w0" | tr -d ' ') $(ps -o ppid= -p "$w1" | tr -d ' ')" "$master $master"
t_check "USR2: new workers ($w0 $w1), not the old ($old0 $old1)" \
	test "$w0" != "$old0" -a "$w1" != "$old1"
t_eq "USR2: the new workers took over the $((N - 1)) rocks" "$(sed -n \
	"s/.* rockd\[\($w0\|$w1\)\]: info: rockd_takeover: took over \([0-9]*\) rocks.*/\2/p" "$log" |
	awk '{ n += $1 } END { print n + 0 }')" "$((N - 1))"
# A round sent into a blackhole: each of A's rocks reconnects to the
# new workers, passed on to the one holding it as before.
before=$(grep -c "client reconnected" "$log")
want=$(($(outs | grep -c .) + N - 1))
nn_blackhole both
echo go >&"$rounds_fd"
echo go >&"$roundsb_fd"
nap 4
nn_restore
wait_for 60 answers "$want" || t_bad "USR2, then a blackhole: the round is answered"
t_check "USR2, then a blackhole: A's $live_a rocks reconnected to the new workers" \
	test "$(grep -c "client reconnected" "$log")" -ge $((before + live_a))
t_eq "USR2, then a blackhole: the $((N - 1)) rocks echo on, exact" \
	"$(outs | grep -c "round 3 conn [0-9]* ok")" "$((N - 1))"
t_check "USR2, then a blackhole: the new workers passed reconnects to each other" \
	grep -Eq "rockd\[($w0|$w1)\]: debug: route: reconnect for worker [01]: passed to it" "$log"
ls_rockd >"$t_tmp/ls2"
t_eq "USR2: rock ls lists them from the new workers" \
	"$(awk -v a="$w0" -v b="$w1" '$2 == a || $2 == b' "$t_tmp/ls2" | wc -l)" "$((N - 1))"

# ---- worker 1 killed: its rocks end with a reset, never a clean end ----
on1=$(awk -v w="$w1" '$2 == w' "$t_tmp/ls2" | wc -l)
made1=$((on1 + 1))
kill -KILL "$w1"
wait_for 10 grep -q "worker 1 (pid $w1) killed by signal 9" "$log" ||
	t_bad "the master saw worker 1 die"
wait_for 10 grep -q "worker 1 restarted" "$log" || t_bad "the master restarted worker 1"
# Its rocks find their worker without them (UNKNOWN): the next round
# fails there with ECONNRESET, and goes on everywhere else.
round 60 "$((N - 1))"
t_eq "worker 0's $((N - made1)) rocks echo on" \
	"$(outs | grep -c "round 4 conn [0-9]* ok")" "$((N - made1))"
t_eq "worker 1's $on1 rocks: ECONNRESET" \
	"$(outs | grep -c "round 4 conn [0-9]* error ECONNRESET")" "$on1"
t_check "no MISMATCH and no eof" eval '! outs | grep -Eq "MISMATCH|eof"'
new1=$(sed -n 's/.* rockd\[\([0-9]*\)\]: info: respawn: worker 1 restarted (pid \([0-9]*\)).*/\2/p' "$log")
t_check "the new worker 1 has a pid ($new1)" test -n "$new1"
t_check "the new worker 1 listens on 7000" eval \
	"nn_s ss -Hltnp 'sport = :7000' | grep -q 'pid=${new1:-none},'"
# A USR2 that reaches a worker (pkill -USR2 rockd) starts no hand-over.
kill -USR2 "$w0"
wait_for 5 grep -q "SIGUSR2 to worker 0: ignored" "$log" || t_bad "worker 0 logs an ignored USR2"
round 60 "$((N - made1))"
t_eq "after a USR2 to a worker, worker 0's rocks echo on" \
	"$(outs | grep -c "round 5 conn [0-9]* ok")" "$((N - made1))"
t_eq "rock ls: worker 0's rocks, none of the dead worker's" "$(ls_rockd | awk '{ print $2 }' | sort | uniq -c | awk '{ print $1, $2 }')" \
	"$((N - made1)) $w0"
t_check "no hand-over started" eval "! grep -q 'rockd\[$w0\]: .*SIGUSR2: started' '$log'"

# ---- SIGTERM: the master and both workers stop; the pidfile goes ----
exec {rounds_fd}>&- {roundsb_fd}>&-
kill -TERM "$master"
if wait_for 40 eval "! kill -0 $master 2>/dev/null"; then
	t_ok "SIGTERM: the master exits"
else
	t_bad "SIGTERM: the master exits within 40 s"
fi
t_check "SIGTERM: it says the workers stopped" grep -q ' workers stopped$' "$log"
t_check "SIGTERM: no worker left" eval "! kill -0 $w0 2>/dev/null && ! kill -0 ${new1:-$w1} 2>/dev/null"
t_check "SIGTERM: the pidfile is gone" test ! -e "$t_tmp/rockd.pid"
t_eq "no sanitizer report in rockd's log" \
	"$(grep -c -e 'Sanitizer' -e 'runtime error' "$log")" 0
t_done
