#!/usr/bin/env bash
# rock-renumber.sh: a rock that found its server by name rides out RSTs, a 15 s blackhole and a client address change, follows its server to a new IPv4 address and from IPv4 to IPv6 (looked up again, dialed byte-exact), and never resumes at another rockd the name points to; a plain download by the same name is the control.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
rock_netns_up

NAME=server.rock.test
NEW4=192.0.2.2 NEW4_GW=192.0.2.1 LAST4=192.0.2.3
# `ip netns exec` puts /etc/netns/NS/hosts over /etc/hosts; it is
# rewritten in place (same inode) so the running client sees each change.
HOSTS_DIR=/etc/netns/$NN_C
mkdir -p "$HOSTS_DIR" || t_skip_all "cannot make $HOSTS_DIR"
nn_on_cleanup "rm -rf '$HOSTS_DIR'"
hosts() { printf '%s\n' "$@" | sed "s/\$/ $NAME/" >"$HOSTS_DIR/hosts"; }
log="$t_tmp/client.log"
# PATTERN AFTER_LINE: the log has a line matching PATTERN past line AFTER_LINE.
logged_after() { tail -n +"$(($2 + 1))" "$log" | grep -q -- "$1"; }
lines() { wc -l <"$log"; }
# AFTER_LINE WHAT: after a fault that ended at $t0, wait for the log to
# say the rock reconnected and for new bytes to arrive; print the time it took.
resumed() {
	local from=$1 what=$2 before
	before=$(size "$t_tmp/got")
	if wait_for 10 eval 'logged_after "reconnected; resending" "$from" && [ "$(size "$t_tmp/got")" -gt "$before" ]'; then
		t_ok "$what: data flows again $(($(now_ms) - t0)) ms after it"
	else
		t_bad "$what: no data 10 s after it"
	fi
}

hosts "$NN_S_ADDR"
nn_s "$ROCKD" -F -v --listen 7000 --backend 127.0.0.1:9000 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_s "$TRAFFIC" source 9000 400000 60 "$t_tmp/sent" 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 20 || t_fail_all "rockd did not start"
nn_wait_port "$NN_S" 127.0.0.1 9000 5 || t_skip_all "the backend did not start"
nn_r ip addr add "$NEW4_GW/24" dev "$NN_R_SIF"

ROCK_DEBUG=1 ROCK_LOG="$log" t_foreign nn_c "$ROCK" "$TRAFFIC" sink "$NAME" 7000 \
	"$t_tmp/got" >"$t_tmp/sink.out" 2>"$t_tmp/sink.err" &
sink_pid=$! pids+=($!)
# The control: a plain download by the same name, through socat.
nn_s "$TRAFFIC" source 9002 400000 60 "$t_tmp/plain-sent" 2>/dev/null &
pids+=($!)
nn_s socat TCP4-LISTEN:7002,reuseaddr TCP4:127.0.0.1:9002 2>/dev/null &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9002 5 && nn_wait_port "$NN_S" "$NN_S_ADDR" 7002 5 ||
	t_skip_all "the plain server did not start"
nn_c "$TRAFFIC" sink "$NAME" 7002 "$t_tmp/plain-got" >"$t_tmp/plain.out" 2>&1 &
pids+=($!)
wait_for 10 eval '[ "$(size "$t_tmp/got")" -gt 100000 ]' || t_bad "no data over the rock"
t_check "the rock knows its server by name" grep -q "the server is $NAME by name" "$log"

# ---- 0. the client's path: RSTs, a 15 s blackhole, a new client address
at=$(lines)
nn_rst_inject both
nap 1
nn_restore
t0=$(now_ms)
resumed "$at" "RSTs for 1 s"
plain_then=$(size "$t_tmp/plain-got")
at=$(lines)
nn_blackhole both
nap 15
nn_restore
t0=$(now_ms)
resumed "$at" "a 15 s blackhole"
at=$(lines) t0=$(now_ms)
nn_change_client_addr >/dev/null
resumed "$at" "a client address change"
# The RSTs reached the plain server (the client, only reading, sent
# nothing to be answered): its download stops there, without an error.
t_eq "control: the plain download died at the RSTs (no byte since)" \
	"$(size "$t_tmp/plain-got")" "$plain_then"

# ---- 1. IPv4 renumbering: the old address goes, a new one in another subnet
at=$(lines) t0=$(now_ms)
nn_s ip addr add "$NEW4/24" dev "$NN_S_IF"
nn_s ip addr del "$NN_S_ADDR/24" dev "$NN_S_IF"
nn_s ip route replace default via "$NEW4_GW"
hosts "$NEW4"
resumed "$at" "IPv4 renumbering"
t_check "the rock says it moved from $NN_S_ADDR to $NEW4" \
	logged_after "the server moved from $NN_S_ADDR:7000 to $NEW4:7000" "$at"

# ---- 2. IPv4 goes away: the name has both families, IPv6 answers
at=$(lines) t0=$(now_ms)
nn_s ip addr del "$NEW4/24" dev "$NN_S_IF"
hosts "$NEW4" "$NN_S_ADDR6"
resumed "$at" "IPv4 to IPv6"
t_check "the rock says it moved from $NEW4 to [$NN_S_ADDR6]" \
	logged_after "the server moved from $NEW4:7000 to \[$NN_S_ADDR6\]:7000" "$at"

# ---- 3. the name points to another rockd (another key): no resume there
nn_r "$ROCKD" -F -v --key "$t_tmp/other.key" --listen 7000 --backend 127.0.0.1:9 \
	2>"$t_tmp/other.log" &
pids+=($!)
nn_wait_port "$NN_R" "$NN_C_GW" 7000 5 || t_bad "the other rockd did not start"
at=$(lines) t0=$(now_ms)
nn_s ip -6 addr del "$NN_S_ADDR6/64" dev "$NN_S_IF"
hosts "$NN_C_GW"
if wait_for 10 logged_after "not signed by the server's key" "$at"; then
	t_ok "the other rockd's refusal is not the server's: a failed attempt ($(($(now_ms) - t0)) ms)"
else
	t_bad "no refusal from the other rockd logged in 10 s"
fi
got_then=$(size "$t_tmp/got")
nap 1
t_check "the other rockd was asked to resume the rock" grep -q 'reconnect' "$t_tmp/other.log"
t_check "the rock did not resume there" eval '! logged_after "reconnected; resending" "$at"'
t_check "nor moved there" eval '! logged_after "moved .* to $NN_C_GW" "$at"'
t_eq "no byte arrived in the second after" "$(size "$t_tmp/got")" "$got_then"
t_check "the program is still running" kill -0 "$sink_pid"

# ---- 4. the server comes back under the name: the rock resumes, exact
at=$(lines) t0=$(now_ms)
nn_s ip addr add "$LAST4/24" dev "$NN_S_IF"
nn_s ip route replace default via "$NEW4_GW"
hosts "$LAST4"
resumed "$at" "back after the other rockd"
touch "$t_tmp/sent.stop"
if wait_pid "$sink_pid" 20; then
	t_eq "the download ends exact (exit status)" "$waited" 0
else
	t_bad "the download did not end 20 s after the source stopped"
fi
t_eq "all $(size "$t_tmp/sent") bytes the backend sent arrived" \
	"$(size "$t_tmp/got")" "$(size "$t_tmp/sent")"
t_check "byte for byte" cmp -s "$t_tmp/got" "$t_tmp/sent"
t_done
