#!/usr/bin/env bash
# rock-hello-late.sh: a rock's hello lost twice arrives after rockd's wait for a plain client's first bytes: rockd resets that connection before its backend gets a byte of it, and the client makes its handshake again and is a rock, for a backend that speaks first and one that does not.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
[ -x "$ROCKD" ] || t_skip_all "rockd not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
rock_netns_up
nn_on_cleanup drop_rules

# shellcheck disable=SC2317 # run by nn_cleanup
drop_rules() { nn_c iptables -w -F OUTPUT 2>/dev/null; }

# Each backend keeps what its clients sent, every connection's bytes.
nn_s socat TCP4-LISTEN:9311,bind=127.0.0.1,reuseaddr,fork \
	SYSTEM:"echo banner; exec tee -a $t_tmp/9311.got" 2>/dev/null &
pids+=($!)
nn_s socat TCP4-LISTEN:9312,bind=127.0.0.1,reuseaddr,fork \
	SYSTEM:"exec tee -a $t_tmp/9312.got" 2>/dev/null &
pids+=($!)
nn_s "$ROCKD" -F -v --listen 7311 --backend 127.0.0.1:9311 \
	--listen 7312 --backend 127.0.0.1:9312 --listen 7313 --backend 127.0.0.1:9313 \
	2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9311 5 && nn_wait_port "$NN_S" 127.0.0.1 9312 5 ||
	t_skip_all "the backends did not start"
nn_wait_port "$NN_S" "$NN_S_ADDR" 7312 20 || t_fail_all "rockd did not start (log: $(tail -n 3 "$t_tmp/rockd.log"))"

# The client's first two segments of 1,000 bytes or more to PORT (not a
# SYN) are dropped: its hello (1,166 bytes), resent after its first
# retransmission timeout and then after twice that, reaches rockd after
# its wait for a silent client's first bytes on every path profile.
# NAME PORT WANT: a program under rock (socat) sends a line through that
# loss, and prints WANT. Any path profile (NN_PROFILE).
late_hello() {
	local name=$1 port=$2 want=$3 dropped from n op
	from=$(wc -l <"$t_tmp/rockd.log")
	for _ in 1 2; do
		nn_c iptables -w -I OUTPUT -p tcp --dport "$port" ! --syn -m length --length 1000:65535 \
			-m statistic --mode nth --every 1000000 --packet 0 -j DROP
	done
	printf 'line1\n' | ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$name.log" \
		t_foreign nn_c "$ROCK" socat -t 5 - "TCP4:$NN_S_ADDR:$port" >"$t_tmp/$name.out" 2>"$t_tmp/$name.err"
	t_eq "$name: socat's exit status" "$?" 0
	t_eq "$name: socat printed the backend's bytes exactly" "$(cat "$t_tmp/$name.out")" "$want"
	dropped=$(nn_c iptables -w -L OUTPUT -v -n -x | awk '/statistic/ { n += $1 } END { print n }')
	drop_rules
	t_eq "$name: two copies of the hello were lost" "$dropped" 2
	t_eq "$name: the backend got the line once and nothing of the hello" \
		"$(head -c 32 "$t_tmp/$((port + 2000)).got" 2>/dev/null | od -An -c | tr -s ' \n' ' ')" " l i n e 1 \\n "
	# A path profile's own losses (a SYN resent, say) can push the second
	# resend past the client's 10 s for a handshake: it goes plain then,
	# and rockd may see that hello only after socat has gone.
	if [ -n "${NN_PROFILE:-}" ] && grep -q 'no rock (timed out)' "$t_tmp/$name.log"; then
		t_ok "$name: the hello came after the client's 10 s on $NN_PROFILE: plain, nothing lost"
		return
	fi
	# Once on a clean path; a profile's own loss can make the hello of
	# the handshake made again late too.
	op=-eq
	[ -n "${NN_PROFILE:-}" ] && op=-ge
	n=$(tail -n +$((from + 1)) "$t_tmp/rockd.log" | grep -c 'no byte in [0-9]* ms: a plain client')
	t_check "$name: rockd took the client for a silent plain one ($n times)" [ "$n" "$op" 1 ]
	n=$(tail -n +$((from + 1)) "$t_tmp/rockd.log" | grep -c "a rock's hello came after the wait")
	t_check "$name: rockd reset the relay when the hello came ($n times)" [ "$n" "$op" 1 ]
	t_check "$name: the client made its handshake again" \
		grep -q 'handshake: reset; again' "$t_tmp/$name.log"
	t_is_rock "$name" "$t_tmp/$name.log" 'handshake\|plain\|relay\|rock' \
		"$t_tmp/$name.log" "$t_tmp/rockd.log"
}
late_hello speaks-first 7311 "$(printf 'banner\nline1')"
late_hello silent 7312 line1

# The look at a silent client's first bytes takes no more than them: a
# plain client that sends nothing and aborts (SO_LINGER 0) after its relay
# began is still a reset at the backend, never a clean end.
nn_s python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9313)); s.listen(4)
while True:
    c, _ = s.accept(); c.sendall(b"banner\n")
    try:
        how = "eof %r" % c.recv(100)
    except ConnectionResetError:
        how = "reset"
    open(sys.argv[1], "a").write(how + "\n"); c.close()
' "$t_tmp/9313.ends" 2>"$t_tmp/9313.err" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9313 5 || t_fail_all "the recording backend did not start"
nn_c python3 -c '
import socket, struct, sys
c = socket.create_connection((sys.argv[1], 7313), timeout=10)
print(c.recv(100).decode(), end="")
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close()
' "$NN_S_ADDR" >"$t_tmp/abort.out" 2>&1
t_eq "abort: the silent client got the banner through the relay" "$(cat "$t_tmp/abort.out")" banner
wait_for 5 test -s "$t_tmp/9313.ends"
t_eq "abort: the backend saw a reset" "$(cat "$t_tmp/9313.ends" 2>/dev/null)" reset
t_done
