#!/usr/bin/env bash
# rockd-fleet.sh: three rockd nodes with one key behind HAProxy (rock-haproxy's config): 60 rocks spread over the nodes, through a 10 s blackhole and a new client address each reconnect reaches its own node, byte-exact; HAProxy reloaded (-sf) mid-stream loses nothing; node 2 killed: its rocks end with ECONNRESET, told by a sibling, the others echo on; a reconnect sent to the wrong node is told ELSEWHERE and the rock lives on; udp-address none, :PORT and HOST:PORT send the records nowhere, through the balancer's host, or to the node's own address.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
RH="$top_srcdir/tools/rock-haproxy"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
command -v haproxy >/dev/null || t_skip_all "haproxy not installed (sh tools/bootstrap.sh deps)"
command -v curl >/dev/null || t_skip_all "curl not installed"
command -v python3 >/dev/null || t_skip_all "python3 not installed"
rock_netns_up
# shellcheck disable=SC2317 # run by nn_cleanup
stop_haproxy() { pkill -f "haproxy.*$t_tmp/" 2>/dev/null; }
nn_on_cleanup stop_haproxy

N=60
NODES="1 2 3"
rtt=$(nn_profile_rtt_ms "${NN_PROFILE:-lan}") || t_skip_all "unknown path profile ${NN_PROFILE:-}"
# Budgets on this path: N rocks made one after another, a few round
# trips each; a round of N echoes; a reconnect after the path is back.
make_s=$((30 + N * 4 * rtt / 1000))
round_s=$((30 + N * 4 * rtt / 1000))
nn_s socat -t 60 "TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork,backlog=512" EXEC:cat 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 || t_skip_all "the echo backend did not start"

# Node K listens on 710K, its UDP control channel there too: the client
# sends its heartbeats to the address it connected to (the balancer's,
# which is the nodes' host here) at the node's port.
# Each node's file names the others (and itself, which it skips: one list
# serves every node).
mkdir -m 0700 "$t_tmp/ctl"
for k in $NODES; do
	{
		echo "listen $NN_S_ADDR:710$k backend 127.0.0.1:9000"
		echo "node $k"
		for j in $NODES; do echo "peer $j $NN_S_ADDR:710$j"; done
	} >"$t_tmp/node$k.conf"
	nn_s "$ROCKD" -F -v --workers 1 -k "$t_tmp/key" -p "$t_tmp/node$k.pid" \
		--metrics "127.0.0.1:919$k" --control "$t_tmp/ctl/node$k" \
		-f "$t_tmp/node$k.conf" 2>"$t_tmp/node$k.log" &
	pids+=($!)
	# The first makes the key the others share.
	nn_wait_port "$NN_S" "$NN_S_ADDR" "710$k" 20 || t_fail_all "node $k did not listen"
done
t_check "each node says it is one" eval \
	'[ "$(cat "$t_tmp"/node[123].log | grep -c "node [123] of a fleet")" -eq 3 ]'
# NAME: the sum over the nodes of a metric's samples; "missing" unless
# every node's endpoint had the family.
metric() {
	local k
	for k in $NODES; do nn_s curl -s --max-time 5 "http://127.0.0.1:919$k/metrics"; done |
		awk -v n="$1" -v want="$(echo "$NODES" | wc -w)" '$0 == "# TYPE " n " counter" { fams++ }
			index($1, n "{") == 1 { s += $2 }
			END { if (fams == want) print s + 0; else print "missing" }'
}
t_eq "each node's metrics give its number" \
	"$(for k in $NODES; do nn_s curl -s --max-time 5 "http://127.0.0.1:919$k/metrics" | sed -n 's/^rockd_node{worker="0"} //p'; done | tr '\n' ' ')" "1 2 3 "

"$RH" "$NN_S_ADDR:7000" 1="$NN_S_ADDR:7101" 2="$NN_S_ADDR:7102" 3="$NN_S_ADDR:7103" \
	>"$t_tmp/haproxy.cfg" 2>"$t_tmp/rh.err"
t_eq "rock-haproxy printed a config" "$?" 0
t_check "haproxy -c accepts it" eval 'haproxy -c -q -f "$t_tmp/haproxy.cfg" >"$t_tmp/haproxy-c.log" 2>&1'
t_check "rock-haproxy refuses a node twice (exit 2)" eval \
	'"$RH" :7000 1=a:1 1=b:2 >/dev/null 2>&1; [ $? -eq 2 ]'
nn_s haproxy -D -f "$t_tmp/haproxy.cfg" -p "$t_tmp/haproxy.pid" 2>"$t_tmp/haproxy.log" ||
	t_fail_all "haproxy did not start ($(tail -n 3 "$t_tmp/haproxy.log"))"
nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 10 || t_fail_all "haproxy did not listen"

mkfifo "$t_tmp/rounds.in"
exec {rounds_fd}<>"$t_tmp/rounds.in"
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/client.log" t_foreign nn_c "$ROCK" "$TRAFFIC" rounds \
	"$NN_S_ADDR" 7000 "$N" 8192 <"$t_tmp/rounds.in" >"$t_tmp/rounds.out" \
	2>"$t_tmp/rounds.err" &
client=$! pids+=($!)
answers() { [ "$(grep -c . "$t_tmp/rounds.out")" -ge "$1" ]; }
# SECONDS: one round, N answers.
round() {
	local want=$(($(grep -c . "$t_tmp/rounds.out") + N))
	echo go >&"$rounds_fd"
	wait_for "$1" answers "$want"
}
round "$make_s"
t_eq "$N rocks through HAProxy echo a round" "$(grep -c "round 0 conn [0-9]* ok" "$t_tmp/rounds.out")" "$N"

# NAME of each rock node K made (its id's first 4 bytes in hex), from
# "client connected"; and of each it took back ("client reconnected").
made() { sed -n 's/.*: rock \([0-9a-f]*\): client connected.*/\1/p' "$t_tmp/node$1.log"; }
taken() { sed -n 's/.*: rock \([0-9a-f]*\): client reconnected.*/\1/p' "$t_tmp/node$1.log"; }
total=0 spread=
for k in $NODES; do
	c=$(made "$k" | wc -l)
	total=$((total + c)) spread="$spread $c"
	t_eq "node $k: every id it made names it (byte 0 = 0$k)" "$(made "$k" | grep -vc "^0$k")" 0
done
t_eq "the nodes made all $N rocks, none refused, none plain" "$total" "$N"
t_eq "leastconn spread them over the nodes ($spread), at least $((N / 6)) each" \
	"$(echo "$spread" | awk -v min=$((N / 6)) '{ for (i = 1; i <= NF; i++) if ($i < min) bad++ } END { print bad + 0 }')" 0
t_eq "no connect went plain" "$(grep -c 'not enhanced' "$t_tmp/client.log")" 0
t_eq "rock ls at node 1: its rocks, as program rockd:node1" "$(
	XDG_RUNTIME_DIR="$t_tmp/none" "$ROCK" ls --json --rockd "$t_tmp/ctl/node1" | python3 -c '
import json, sys
rows = json.load(sys.stdin)
print(len(rows), sorted(set(r["program"] for r in rows)))')" "$(made 1 | wc -l) ['rockd:node1']"
# A resumption that reached a node other than its ticket's was refused
# (TICKET) and made a full handshake: leastconn does not read tickets.
missed=$(grep -c 'early resumption failed (peer refused' "$t_tmp/client.log")

# ---- a 10 s blackhole, then a new client address ---------------------
nn_blackhole both
nap 10
nn_change_client_addr >/dev/null
nn_restore
restored=$(now_ms)
back() {
	local k n=0
	for k in $NODES; do n=$((n + $(taken "$k" | sort -u | wc -l))); done
	[ "$n" -ge "$N" ]
}
wait_for "$make_s" back || t_bad "every rock reconnected ($(cat "$t_tmp"/node[123].log | grep -c 'client reconnected') reconnects)"
back_ms=$(($(now_ms) - restored))
round "$round_s"
t_eq "$N rocks echo after the blackhole and a new address, byte-exact" \
	"$(grep -c "round 1 conn [0-9]* ok" "$t_tmp/rounds.out")" "$N"
for k in $NODES; do
	t_eq "node $k took back exactly the rocks it made" \
		"$(taken "$k" | sort -u | tr '\n' ' ')" "$(made "$k" | sort -u | tr '\n' ' ')"
done
t_eq "HAProxy sent no reconnect to the wrong node (none answered ELSEWHERE)" \
	"$(metric rockd_reconnects_elsewhere_total)" 0
t_eq "no node refused a reconnect as unknown or unproven" \
	"$(cat "$t_tmp"/node[123].log | grep -cE 'reconnect rejected: (no such session|wrong key)')" 0
t_check "the rocks came back from the new address $NN_C_ADDR" eval \
	'nn_s ss -Htn state established "( sport = :7000 )" | grep -q "$NN_C_ADDR:"'

# ---- HAProxy reloaded mid-stream (-sf, as systemd's reload) ------------
reconnects() { cat "$t_tmp"/node[123].log | grep -c 'client reconnected'; }
before=$(reconnects)
old=$(cat "$t_tmp/haproxy.pid")
echo go >&"$rounds_fd"
nn_s haproxy -D -f "$t_tmp/haproxy.cfg" -p "$t_tmp/haproxy.pid" -sf "$old" 2>>"$t_tmp/haproxy.log" ||
	t_bad "haproxy reloaded"
t_check "a new haproxy took the listener" test "$(cat "$t_tmp/haproxy.pid")" != "$old"
wait_for "$round_s" answers $((3 * N))
t_eq "the round across the reload: $N rocks byte-exact" \
	"$(grep -c "round 2 conn [0-9]* ok" "$t_tmp/rounds.out")" "$N"
t_check "the old haproxy still carries the rocks' connections" kill -0 "$old"
round "$round_s"
t_eq "and the next one" "$(grep -c "round 3 conn [0-9]* ok" "$t_tmp/rounds.out")" "$N"
t_eq "the reload cost no rock a reconnect" "$(reconnects)" "$before"
# A new client goes through the new haproxy.
t_check "a new rock connects through the reloaded haproxy" eval \
	'echo go | nn_c "$ROCK" "$TRAFFIC" bursts "$NN_S_ADDR" 7000 4096 >"$t_tmp/after.out" 2>&1 && grep -q "burst 0 ok" "$t_tmp/after.out"'

# ---- node 2 killed outright ----------------------------------------------
# Its rocks' reconnects find it down (HAProxy's check) and go to a live
# node, which checks node 2 itself; once node 2 has not answered for 10 s
# the sibling refuses them UNKNOWN, signed with the fleet's key: each ends
# with ECONNRESET, never a clean end. The others echo on.
killed=$(date -u +%H:%M:%S.%3N)
kill -9 "$(cat "$t_tmp/node2.pid")"
echo go >&"$rounds_fd"
wait_for $((60 + round_s)) answers $((5 * N))
n2=$(made 2 | wc -l)
# When the last of them ended at the client, in ms after the kill (its
# log's clock is UTC, as is date -u).
gone_ms=$(grep 'CLOSED (node 2 is gone)' "$t_tmp/client.log" | awk -v k="$killed" '
	function ms(t) { split(t, a, ":"); return ((a[1] * 60 + a[2]) * 60 + a[3]) * 1000 }
	{ t = substr($1, 12, 12); if (ms(t) > last) last = ms(t) }
	END { printf "%d\n", (last > 0 ? last - ms(k) : 999999) }')
t_eq "node 2's $n2 rocks ended with ECONNRESET, the others echoed" \
	"$(grep "^round 4 " "$t_tmp/rounds.out" | awk '{ print $5, $6 }' | sort | uniq -c | awk '{ print $1, $2, $3 }' | tr '\n' ' ')" \
	"$n2 error ECONNRESET $((N - n2)) ok  "
t_check "node 2's rocks were ended within 30 s of the kill (the last $gone_ms ms after)" test "$gone_ms" -le 30000
NODES="1 3"
told=$(metric rockd_reconnects_node_gone_total)
t_check "a sibling told them: rockd_reconnects_node_gone_total $told (one per attempt in flight)" \
	test "$told" != missing -a "$told" -ge "$n2"
t_check "the sibling logged that node 2 did not answer" grep -q 'node 2 does not answer' "$t_tmp/node1.log" "$t_tmp/node3.log"
echo go >&"$rounds_fd"
wait_for "$round_s" answers $((6 * N - n2))
t_eq "the other $((N - n2)) echo on" "$(grep -c "round 5 conn [0-9]* ok" "$t_tmp/rounds.out")" $((N - n2))

exec {rounds_fd}>&-
wait_pid "$client" 30 && t_eq "the client ended cleanly" "$waited" 0

# ---- a reconnect routed to the wrong node ------------------------------
# A balancer that does not route by id (round-robin straight to the
# nodes): a reconnect that lands on another node is told ELSEWHERE, and
# the rock dials again until it reaches its own.
printf 'defaults\n\tmode tcp\n\ttimeout connect 5s\n\ttimeout client 1d\n\ttimeout server 1d\nlisten rr\n\tbind %s:7000\n\tbalance roundrobin\n' \
	"$NN_S_ADDR" >"$t_tmp/rr.cfg"
for k in $NODES; do printf '\tserver node%s %s:710%s\n' "$k" "$NN_S_ADDR" "$k" >>"$t_tmp/rr.cfg"; done
stop_haproxy
wait_for 10 eval '! pgrep -f "haproxy.*$t_tmp/haproxy.cfg" >/dev/null' || t_bad "the old haproxy stopped"
nn_s haproxy -D -f "$t_tmp/rr.cfg" -p "$t_tmp/rr.pid" 2>>"$t_tmp/haproxy.log" ||
	t_bad "the round-robin haproxy started"
nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 10 || t_bad "the round-robin haproxy listened"
M=6
# NAME PORT: a client of its own with M rocks through PORT (its log
# NAME-client.log); its input in sc_fd, its pid in sc_pid.
small_client() {
	: >"$t_tmp/$1.out"
	mkfifo "$t_tmp/$1.in"
	exec {sc_fd}<>"$t_tmp/$1.in"
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$1-client.log" t_foreign nn_c "$ROCK" "$TRAFFIC" rounds \
		"$NN_S_ADDR" "$2" "$M" 8192 <"$t_tmp/$1.in" >"$t_tmp/$1.out" 2>"$t_tmp/$1.err" &
	sc_pid=$! pids+=($!)
}
# NAME FD R SECONDS: round R of such a client; how many of its rocks echoed.
small_round() {
	local out="$t_tmp/$1.out" want=$((($3 + 1) * M))
	echo go >&"$2"
	wait_for "$4" eval "[ \"\$(grep -c . '$out')\" -ge $want ]"
	grep -c "round $3 conn [0-9]* ok" "$out"
}
elsewhere0=$(metric rockd_reconnects_elsewhere_total)
small_client rr 7000
rr_fd=$sc_fd rr_client=$sc_pid
t_eq "$M rocks through round-robin echo a round" "$(small_round rr "$rr_fd" 0 "$make_s")" "$M"
before=$(reconnects)
nn_blackhole both
nap 5
nn_restore
restored=$(now_ms)
wait_for "$make_s" eval '[ "$(reconnects)" -ge $((before + M)) ]' ||
	t_bad "every rock reconnected through round-robin ($(($(reconnects) - before)) of $M)"
rr_back_ms=$(($(now_ms) - restored))
t_eq "$M rocks echo after their reconnects went anywhere, byte-exact" \
	"$(small_round rr "$rr_fd" 1 "$round_s")" "$M"
elsewhere=$(($(metric rockd_reconnects_elsewhere_total) - elsewhere0))
t_check "misrouted reconnects were answered ELSEWHERE ($elsewhere)" test "$elsewhere" -ge 1
t_check "and logged so" grep -q 'answered ELSEWHERE' "$t_tmp/node1.log" "$t_tmp/node2.log" "$t_tmp/node3.log"
t_eq "none was refused as unknown or unproven" \
	"$(cat "$t_tmp"/node[123].log | grep -cE 'reconnect rejected: (no such session|wrong key)')" 0
exec {rr_fd}>&-
wait_pid "$rr_client" 30 && t_eq "the round-robin client ended cleanly" "$waited" 0
pkill -f "haproxy.*$t_tmp/rr.cfg"

# ---- where the rocks' records go: udp-address none, :PORT, HOST:PORT ---
# Node 4 tells its clients no UDP port: their control stays on TCP. Node
# 5 tells them port 7205 at the address they connected to (the
# balancer's), which this host forwards to node 5's own (DNAT), as a
# balancer host would for nodes elsewhere. Node 6 has an address of its
# own ($N6), which its answers name (UDP_ADDRESS): its clients send
# there, not to the balancer, and it answers where their records come
# from, after the client's address changed too.
N6=203.0.113.6
# shellcheck disable=SC2317 # run by nn_cleanup
drop_udp_rules() {
	nn_s iptables -w -t nat -D PREROUTING -p udp --dport 7205 -j DNAT --to-destination "$NN_S_ADDR:7105" 2>/dev/null
	nn_s iptables -w -D INPUT -p udp --dport 7104 2>/dev/null
	nn_s iptables -w -D INPUT -p udp --dport 7105 2>/dev/null
	nn_s iptables -w -D INPUT -p udp -d "$N6" --dport 7106 2>/dev/null
	nn_s iptables -w -D INPUT -p udp -d "$NN_S_ADDR" --dport 7106 2>/dev/null
	nn_c iptables -w -D INPUT -p udp -s "$N6" --sport 7106 2>/dev/null
}
nn_on_cleanup drop_udp_rules
nn_s ip addr add "$N6/24" dev "$NN_S_IF"
nn_s iptables -w -t nat -A PREROUTING -p udp --dport 7205 -j DNAT --to-destination "$NN_S_ADDR:7105"
nn_s iptables -w -I INPUT -p udp --dport 7104
nn_s iptables -w -I INPUT -p udp --dport 7105
nn_s iptables -w -I INPUT -p udp -d "$N6" --dport 7106
nn_s iptables -w -I INPUT -p udp -d "$NN_S_ADDR" --dport 7106
nn_c iptables -w -I INPUT -p udp -s "$N6" --sport 7106
# PORT [ADDR]: UDP datagrams that reached this host for PORT (at ADDR).
udp_in() {
	nn_s iptables -w -L INPUT -v -x -n | awk -v p="dpt:$1" -v d="${2:-}" \
		'$0 ~ p && ($3 == "udp" || $3 == "17") && (d == "" || $8 == d) { print $1 }'
}
# Node 6's records that reached the client.
udp_from_6() { nn_c iptables -w -L INPUT -v -x -n | awk '/spt:7106/ && ($3 == "udp" || $3 == "17") { print $1 }'; }
for k in 4 5 6; do
	at=$NN_S_ADDR
	[ "$k" = 6 ] && at=$N6
	{
		echo "listen $at:710$k backend 127.0.0.1:9000"
		echo "node $k"
		case $k in
		4) echo "udp-address none" ;;
		5) echo "udp-address :7205" ;;
		6) echo "udp-address $N6:7106" ;;
		esac
	} >"$t_tmp/node$k.conf"
	nn_s "$ROCKD" -F -v --workers 1 -k "$t_tmp/key" -p "$t_tmp/node$k.pid" \
		-f "$t_tmp/node$k.conf" 2>"$t_tmp/node$k.log" &
	pids+=($!)
	nn_wait_port "$NN_S" "$at" "710$k" 20 || t_bad "node $k did not listen"
done
"$RH" "$NN_S_ADDR:7010" 4="$NN_S_ADDR:7104" 5="$NN_S_ADDR:7105" 6="$N6:7106" >"$t_tmp/haproxy456.cfg"
nn_s haproxy -D -f "$t_tmp/haproxy456.cfg" -p "$t_tmp/haproxy456.pid" 2>>"$t_tmp/haproxy.log" ||
	t_bad "haproxy for nodes 4, 5 and 6 started"
nn_wait_port "$NN_S" "$NN_S_ADDR" 7010 10 || t_bad "haproxy for nodes 4, 5 and 6 listened"
small_client u 7010
u_fd=$sc_fd u_client=$sc_pid
t_eq "$M rocks through nodes 4, 5 and 6 echo a round" "$(small_round u "$u_fd" 0 "$make_s")" "$M"
told() {
	grep -oE 'connected as client, features [0-9a-fx]*, UDP port [0-9]*( at the address the server named)?' "$t_tmp/u-client.log" |
		awk '{ print $8 ($9 == "at" ? "@named" : "") }' | sort -u | tr '\n' ' '
}
t_eq "the rocks were told no UDP port (node 4), 7205 (node 5) or node 6's own address, never a node's port at the balancer" \
	"$(told)" "0 7106@named 7205 "
nap 3
t_check "records reached node 5 through the forwarded port ($(udp_in 7105) datagrams)" test "$(udp_in 7105)" -gt 0
t_eq "none went to node 4" "$(udp_in 7104)" 0
t_check "records reached node 6 at its own address ($(udp_in 7106 "$N6") datagrams)" test "$(udp_in 7106 "$N6")" -gt 0
t_eq "none went to node 6's port at the balancer's address" "$(udp_in 7106 "$NN_S_ADDR")" 0
t_check "node 6's records reached the client ($(udp_from_6) datagrams)" test "$(udp_from_6)" -gt 0
nn_blackhole both
nap 5
nn_change_client_addr >/dev/null
nn_restore
to6=$(udp_in 7106 "$N6") from6=$(udp_from_6)
wait_for "$make_s" eval '[ "$(cat "$t_tmp"/node[456].log | grep -c "client reconnected")" -ge $M ]' ||
	t_bad "every rock of nodes 4, 5 and 6 reconnected"
t_eq "$M rocks echo after a blackhole and a new address, with and without UDP, byte-exact" \
	"$(small_round u "$u_fd" 1 "$round_s")" "$M"
nap 2
t_check "records from the new address reached node 6 ($to6, then $(udp_in 7106 "$N6"))" test "$(udp_in 7106 "$N6")" -gt "$to6"
t_check "node 6 answered the new address ($from6, then $(udp_from_6))" test "$(udp_from_6)" -gt "$from6"
t_eq "still no record for node 4" "$(udp_in 7104)" 0
t_eq "still none at the balancer's address for node 6" "$(udp_in 7106 "$NN_S_ADDR")" 0
exec {u_fd}>&-
wait_pid "$u_client" 30 && t_eq "that client ended cleanly" "$waited" 0
pkill -f "haproxy.*$t_tmp/haproxy456.cfg"
echo "measured: node 2 killed: its $n2 rocks ended with ECONNRESET, the last $gone_ms ms after the kill"
echo "measured: rocks per node:$spread ($missed resumptions sent to another node than their ticket's made a full handshake);" \
	"all $N back through HAProxy ${back_ms} ms after the restore (polled every 100 ms);" \
	"under round-robin, $M rocks back in ${rr_back_ms} ms, $elsewhere reconnects answered ELSEWHERE"
t_done
