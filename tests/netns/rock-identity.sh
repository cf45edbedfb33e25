#!/usr/bin/env bash
# rock-identity.sh: rockd's key: recorded on first contact, a changed one refused (no plain fallback) until accepted; a forged UNKNOWN answering a reconnect is a failed attempt, a genuine one (rockd -9 and restarted) ends the rock with ECONNRESET.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
FORGE="$top_srcdir/tests/netns/forge-unknown.py"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
command -v python3 >/dev/null || t_skip_all "python3 not installed"
rock_netns_up
nn_on_cleanup drop_dnat

KNOWN="$XDG_CONFIG_HOME/rock/known_servers"
KEY="$XDG_STATE_HOME/rockd/key"
small=100000
"$TRAFFIC" pattern "$small" >"$t_tmp/pattern"

# shellcheck disable=SC2317 # run by nn_cleanup
drop_dnat() { nn_r iptables -w -t nat -F PREROUTING 2>/dev/null; }
# [ARGS...]: rockd's own pid in $rockd_pid (ip netns exec forks).
start_rockd() {
	rm -f "$t_tmp/rockd.pid"
	nn_s "$ROCKD" -F -v -p "$t_tmp/rockd.pid" "$@" --listen 7000 --backend 127.0.0.1:9000 \
		--listen 7001 --backend 127.0.0.1:9001 --listen 7002 --backend 127.0.0.1:9002 \
		2>>"$t_tmp/rockd.log" &
	pids+=($!)
	nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 20 || t_fail_all "rockd did not start"
	rockd_pid=$(cat "$t_tmp/rockd.pid")
}
stop_rockd() {
	kill -TERM "$rockd_pid"
	wait_for 10 eval '! kill -0 "$rockd_pid" 2>/dev/null'
}
# The key rockd logged last.
rockd_key() { grep -o 'server key [A-Za-z0-9+/=]*' "$t_tmp/rockd.log" | tail -1 | cut -d' ' -f3; }
# NAME [VAR=VALUE...]: the small download under rock; exit status in $rc.
fetch() {
	local name=$1
	shift
	t_foreign env "$@" ip netns exec "$NN_C" "$ROCK" "$TRAFFIC" sink "$NN_S_ADDR" 7000 "$t_tmp/$name.got" \
		>"$t_tmp/$name.out" 2>"$t_tmp/$name.err"
	rc=$?
}
mode() { stat -c %a "$1" 2>/dev/null; }

nn_s socat -t 30 "TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork" \
	SYSTEM:"'$TRAFFIC' pattern $small" 2>/dev/null &
pids+=($!)
nn_s "$TRAFFIC" source 9001 200000 60 "$t_tmp/forged.sent" 2>/dev/null &
pids+=($!)
nn_s "$TRAFFIC" source 9002 200000 60 "$t_tmp/killed.sent" 2>/dev/null &
pids+=($!)
for p in 9000 9001 9002; do
	nn_wait_port "$NN_S" 127.0.0.1 "$p" 5 || t_skip_all "the backends did not start"
done

# ---- 0. a key file rockd cannot trust stops it at start (exit 2); -t makes none
"$ROCKD" -t --key "$t_tmp/none.key" >/dev/null 2>&1
t_eq "rockd -t with a missing key: OK, and no file made" "$? $(size "$t_tmp/none.key")" "0 0"
head -c 32 /dev/urandom >"$t_tmp/open.key"
chmod 644 "$t_tmp/open.key"
"$ROCKD" -t --key "$t_tmp/open.key" >/dev/null 2>"$t_tmp/open.err"
t_eq "rockd with a key file of mode 644: exit status" "$?" 2
t_eq "rockd with a key file of mode 644: says so" "$(cat "$t_tmp/open.err")" \
	"rockd: key file $t_tmp/open.key: mode 0644: a key file must not be accessible by group or others (chmod 600)"
head -c 31 /dev/urandom >"$t_tmp/short.key"
chmod 600 "$t_tmp/short.key"
"$ROCKD" -F --key "$t_tmp/short.key" --listen 7999 --backend 127.0.0.1:9 >/dev/null 2>"$t_tmp/short.err"
t_eq "rockd with a 31-byte key file: exit status" "$?" 2
t_eq "rockd with a 31-byte key file: says so" "$(cat "$t_tmp/short.err")" \
	"rockd: key file $t_tmp/short.key: 31 bytes: a key file holds 32"

# ---- 1. first contact records the key; the second connection matches it
start_rockd
key1=$(rockd_key)
t_eq "rockd made its key file, mode 600, 32 bytes" "$(mode "$KEY") $(size "$KEY")" "600 32"
fetch first ROCK_LOG="$t_tmp/first.log" ROCK_DEBUG=1
t_eq "first contact: the download is exact (exit status)" "$rc" 0
t_check "first contact: a rock" grep -q ': a rock$' "$t_tmp/first.log"
t_eq "first contact: the key is recorded for $NN_S_ADDR:7000" \
	"$(cat "$KNOWN" 2>/dev/null)" "$NN_S_ADDR:7000 $key1"
t_eq "known_servers mode 600 in a directory of mode 700" \
	"$(mode "$KNOWN") $(mode "$(dirname "$KNOWN")")" "600 700"
fetch second ROCK_LOG="$t_tmp/second.log" ROCK_DEBUG=1
t_eq "second contact: exact (exit status)" "$rc" 0
t_check "second contact: a rock with the known key" grep -q ': a rock$' "$t_tmp/second.log"
t_eq "second contact: still one line" "$(wc -l <"$KNOWN")" 1

# ---- 2. rockd with another key: refused, with no plain connection instead
stop_rockd
start_rockd --key "$t_tmp/other.key"
key2=$(rockd_key)
t_check "the new rockd has another key ($key2)" test -n "$key2" -a "$key2" != "$key1"
fetch changed
t_eq "changed key: the program's connect fails (exit status)" "$rc" 1
t_check "changed key: with ECONNREFUSED ($(tail -1 "$t_tmp/changed.err"))" \
	grep -q 'Connection refused' "$t_tmp/changed.err"
t_check "changed key: the warning names the destination, file:line and both keys" \
	grep -q "key of server $NN_S_ADDR:7000 has changed: $KNOWN:1 says $key1, the server now proves $key2" \
	"$t_tmp/changed.err"
t_check "changed key: the warning says how to accept it" \
	grep -q 'ROCK_ACCEPT_NEW_KEY=1' "$t_tmp/changed.err"
t_eq "changed key: no byte came over a plain connection" "$(size "$t_tmp/changed.got")" 0
t_eq "changed key: the file is unchanged" "$(cat "$KNOWN")" "$NN_S_ADDR:7000 $key1"
fetch accepted ROCK_ACCEPT_NEW_KEY=1 ROCK_LOG="$t_tmp/accepted.log"
t_eq "ROCK_ACCEPT_NEW_KEY=1: connects and is exact (exit status)" "$rc" 0
t_eq "ROCK_ACCEPT_NEW_KEY=1: the line is replaced" "$(cat "$KNOWN")" "$NN_S_ADDR:7000 $key2"
fetch after
t_eq "after accepting: the new key is the known one (exit status)" "$rc" 0

# ---- 3. a forged UNKNOWN answers the reconnect: a failed attempt only
rm -f "$t_tmp/forge.ready"
nn_r python3 "$FORGE" "$NN_C_GW" 7999 "$t_tmp/forge.ready" "$t_tmp/forge.count" 2>"$t_tmp/forge.log" &
pids+=($!)
wait_for 5 test -s "$t_tmp/forge.ready" || t_bad "the forger did not start"
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/forged.log" t_foreign nn_c "$ROCK" \
	"$TRAFFIC" sink "$NN_S_ADDR" 7001 "$t_tmp/forged.got" >"$t_tmp/forged.out" 2>"$t_tmp/forged.err" &
sink_pid=$! pids+=($!)
wait_for 10 test "$(size "$t_tmp/forged.got")" -gt 200000
# New connections to rockd go to the forger; RSTs break the data connection.
nn_r iptables -w -t nat -A PREROUTING -p tcp -s "$NN_C_NET" -d "$NN_S_ADDR" --dport 7001 \
	--syn -j DNAT --to-destination "$NN_C_GW:7999"
nn_rst_inject c2s
nap 0.5
nn_restore
wait_for 10 test -s "$t_tmp/forge.count"
nap 2
drop_dnat
forged=$(grep -c answered "$t_tmp/forge.count" 2>/dev/null || echo 0)
# Every other answer is an ERROR longer than any (it overran the client's
# buffer once): at least one of each.
t_check "the forger answered $forged reconnect attempts (unsigned UNKNOWN, overlong ERROR)" \
	test "$forged" -ge 2
t_check "the client logged the refusal as not signed" \
	grep -q 'not signed by the server.s key' "$t_tmp/forged.log"
touch "$t_tmp/forged.sent.stop"
if wait_pid "$sink_pid" 60; then
	t_eq "forged UNKNOWN: the rock lives on, every byte exact (exit status)" "$waited" 0
else
	t_bad "forged UNKNOWN: the download still runs 60 s after the forger left"
fi
t_eq "forged UNKNOWN: all $(size "$t_tmp/forged.sent") bytes the backend sent arrived" \
	"$(size "$t_tmp/forged.got")" "$(size "$t_tmp/forged.sent")"
t_check "forged UNKNOWN: the rock reconnected to rockd" \
	grep -q 'reconnected; resending' "$t_tmp/forged.log"

# ---- 4. rockd -9, restarted with the same key: its UNKNOWN is genuine
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/killed.log" t_foreign nn_c "$ROCK" \
	"$TRAFFIC" sink "$NN_S_ADDR" 7002 "$t_tmp/killed.got" >"$t_tmp/killed.out" 2>"$t_tmp/killed.err" &
sink_pid=$! pids+=($!)
wait_for 10 test "$(size "$t_tmp/killed.got")" -gt 100000
kill -KILL "$rockd_pid"
nap 2
start_rockd --key "$t_tmp/other.key"
if wait_pid "$sink_pid" 30; then
	t_eq "killed rockd: the program's read fails (exit status)" "$waited" 1
	t_check "killed rockd: with ECONNRESET ($(tail -1 "$t_tmp/killed.err"))" \
		grep -q 'Connection reset by peer' "$t_tmp/killed.err"
else
	t_bad "killed rockd: the program still waits 30 s after rockd came back"
fi
t_check "killed rockd: the signed UNKNOWN was taken" grep -q 'no such session' "$t_tmp/killed.log"
# ---- 5. a stranger where a known rockd was: refused, never plain
# It announces itself, then answers the hello with an unsigned BUSY, or
# with bytes that are no answer at all. The key rockd proved is pinned.
FAKE="$top_srcdir/tests/netns/fake-rockd.py"
# It claims the version this build speaks: a version it does not share is
# no rockd to the client (plain, as with no announcement at all).
version=$(sed -n 's/^#define ROCK_VERSION[[:space:]]*\([0-9]*\).*/\1/p' "$top_srcdir/lib/rock_wire.h")
port=7997
for mode in busy garbage; do
	port=$((port + 1))
	rm -f "$t_tmp/fake.ready"
	nn_s python3 "$FAKE" "$NN_S_ADDR" "$port" "$t_tmp/fake.ready" "$t_tmp/fake-$mode.log" "$mode" "$version" \
		2>"$t_tmp/fake.err" &
	pids+=($!)
	wait_for 5 test -s "$t_tmp/fake.ready" || t_bad "$mode: the stranger did not start"
	t_foreign env ROCK_SERVER_KEY="$key1" ROCK_LOG="$t_tmp/fake-$mode.rock.log" \
		ip netns exec "$NN_C" "$ROCK" "$TRAFFIC" sink "$NN_S_ADDR" "$port" "$t_tmp/fake.got" \
		>"$t_tmp/fake.out" 2>"$t_tmp/fake-$mode.err"
	rc=$?
	t_check "stranger ($mode): the connect is refused (exit $rc: $(tail -1 "$t_tmp/fake-$mode.err"))" \
		eval '[ "$rc" -ne 0 ] && grep -q "Connection refused" "$t_tmp/fake-$mode.err"'
	t_check "stranger ($mode): it was asked for a rock" grep -q '^hello' "$t_tmp/fake-$mode.log"
	t_eq "stranger ($mode): no plain connection reached it" "$(grep -c '^PLAIN' "$t_tmp/fake-$mode.log")" 0
done

t_done
