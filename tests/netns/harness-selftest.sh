#!/bin/bash
# harness-selftest.sh: proves with real traffic that every fault of tests/netns/netns.sh works (exit 0/1/77).
# shellcheck disable=SC2317 # check functions are only called indirectly, via check()
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=netns.sh source-path=SCRIPTDIR
. "$HERE/netns.sh"
nn_require_root
command -v socat >/dev/null || { echo "SKIP: socat not installed"; exit 77; }

PASSED=0 FAILED=0
TMP=$(mktemp -d)
PORT=7000       # server prints the peer address it sees, v4 and v6
BULK=7001       # server counts the bytes it receives
BYTES=2097152   # 2 MiB for the tbf rate check

# NAME CMD...: run one check, print PASS/FAIL and count it.
check() {
	local name=$1
	shift
	if "$@"; then
		echo "PASS: $name"
		PASSED=$((PASSED + 1))
	else
		echo "FAIL: $name"
		sed 's/^/    /' "$TMP/err" 2>/dev/null
		nn_log "server listeners: $(nn_s ss -Hltn 2>&1 | awk '{ printf "%s ", $4 }')"
		FAILED=$((FAILED + 1))
	fi
	[ ! -d "$TMP" ] || : >"$TMP/err"
}

# Start the socat servers in the server namespace and wait for them.
start_servers() {
	# shellcheck disable=SC2016 # $SOCAT_PEERADDR is expanded by socat's shell
	nn_s socat "TCP4-LISTEN:$PORT,reuseaddr,fork" SYSTEM:'echo $SOCAT_PEERADDR' &
	# shellcheck disable=SC2016
	nn_s socat "TCP6-LISTEN:$PORT,reuseaddr,fork,ipv6only=1" SYSTEM:'echo $SOCAT_PEERADDR' &
	nn_s socat "TCP4-LISTEN:$BULK,reuseaddr,fork" SYSTEM:'wc -c' &
	nn_wait_port "$NN_S" "$NN_S_ADDR" "$PORT" && nn_wait_port "$NN_S" "$NN_S_ADDR6" "$PORT" &&
		nn_wait_port "$NN_S" "$NN_S_ADDR" "$BULK"
}

# ADDR-SPEC: TCP connect from the client (1 s connect timeout); print what the server said.
peer() {
	nn_c timeout 3 socat -T2 -u "$1:$PORT,connect-timeout=1" - 2>"$TMP/err"
}

# Succeed if a v4 connection works and the server sees the client's current address.
tcp4_ok() {
	[ "$(peer "TCP4:$NN_S_ADDR")" = "$NN_C_ADDR" ]
}

# Succeed if a v6 connection works and the server sees the client's v6 address.
tcp6_ok() {
	[ "$(peer "TCP6:[$NN_S_ADDR6]")" = "[2001:0db8:0001:0000:0000:0000:0000:0002]" ]
}

# FAMILY(4|6) PATTERN MAX_MS: connect must fail with PATTERN on stderr within MAX_MS.
tcp_fails() {
	local t0 out dst="TCP4:$NN_S_ADDR"
	[ "$1" = 4 ] || dst="TCP6:[$NN_S_ADDR6]"
	t0=$(nn__ms)
	out=$(peer "$dst")
	[ -z "$out" ] && grep -q "$2" "$TMP/err" && [ $(($(nn__ms) - t0)) -le "$3" ]
}

# FROM_NS TO_NS DST_ADDR PORT: succeed if one UDP datagram gets through.
udp_ok() {
	local f="$TMP/udp$4"
	: >"$f"
	ip netns exec "$2" timeout 1 socat -u "UDP4-RECVFROM:$4" - >"$f" 2>/dev/null &
	local rpid=$! i
	for ((i = 0; i < 40; i++)); do
		ip netns exec "$2" ss -Hlun "sport = :$4" | grep -q . && break
		sleep 0.025
	done
	echo ping | ip netns exec "$1" socat -u - "UDP4-SENDTO:$3:$4"
	wait "$rpid"
	grep -q ping "$f"
}

# Succeed if client->server UDP arrives.
c2s_ok() {
	udp_ok "$NN_C" "$NN_S" "$NN_S_ADDR" 9001
}

# Succeed if server->client UDP arrives.
s2c_ok() {
	udp_ok "$NN_S" "$NN_C" "$NN_C_ADDR" 9002
}

# Negation helper usable with check.
not() {
	! "$@"
}

# Milliseconds to push BYTES client->server; fails unless all bytes arrived.
bulk_ms() {
	local t0 n
	t0=$(nn__ms)
	n=$(head -c "$BYTES" /dev/zero | nn_c socat -t 20 - "TCP4:$NN_S_ADDR:$BULK" 2>/dev/null)
	[ "$n" = "$BYTES" ] || return 1
	echo $(($(nn__ms) - t0))
}

# tbf at 8 Mbit/s must take >= 50% of the theoretical time and exceed the baseline.
tbf_limits() {
	local base slow theory=$((BYTES * 8 / 8000)) # ms at 8 Mbit/s
	base=$(bulk_ms) || return 1
	nn_tbf 8mbit 32kb 100ms || return 1
	slow=$(bulk_ms)
	nn_clear_qdisc
	nn_log "bulk ${BYTES}B: ${base} ms unshaped, ${slow:-?} ms with tbf (theory $theory ms)"
	[ -n "$slow" ] && [ "$slow" -ge $((theory / 2)) ] && [ "$slow" -gt "$base" ]
}

# A 300 ms netem delay client->server (the kernel's, or nfq-netem) slows a
# connect by at least that much; cleared, it is gone.
netem_check() {
	local rc t0 slow fast
	nn_netem c2s delay 300ms || return 1
	t0=$(nn__ms)
	tcp4_ok
	rc=$?
	slow=$(($(nn__ms) - t0))
	nn_netem_clear
	t0=$(nn__ms)
	tcp4_ok || return 1
	fast=$(($(nn__ms) - t0))
	nn_log "connect and exchange: ${slow} ms with netem delay 300ms, ${fast} ms without"
	[ "$rc" = 0 ] && [ "$slow" -ge 300 ] && [ "$fast" -lt 300 ]
}

# Succeed if the client swaps to EXPECTED, reports it, and the server sees it.
change_addr_to() {
	nn_change_client_addr >"$TMP/new" || return 1
	[ "$(cat "$TMP/new")" = "$1" ] && [ "$NN_C_ADDR" = "$1" ] && tcp4_ok
}

# A child that set up and holds a process in its server ns dies by SIGTERM:
# its traps must run both cleanups and leave no namespace behind.
sigterm_cleans() {
	local child names i rc
	# shellcheck disable=SC2016 # expanded by the child shell
	bash -c '. "$1/netns.sh"
		trap "touch $2/old-exit-trap" EXIT
		nn_setup 2>/dev/null || exit 1
		sleep 30 & nn_on_cleanup "kill $!; touch $2/on-cleanup"
		nn_s socat TCP4-LISTEN:7100,reuseaddr,fork EXEC:cat &
		nn_wait_port "$NN_S" 0.0.0.0 7100 && echo "$NN_C $NN_R $NN_S" >"$2/names"
		wait' _ "$HERE" "$TMP" &
	child=$!
	for ((i = 0; i < 100; i++)); do
		[ -s "$TMP/names" ] && break
		sleep 0.05
	done
	names=$(cat "$TMP/names" 2>/dev/null)
	kill -TERM "$child"
	wait "$child"
	rc=$?
	[ "$rc" = 143 ] && [ -e "$TMP/on-cleanup" ] && [ -e "$TMP/old-exit-trap" ] &&
		[ "$names" = "rk${child}c rk${child}r rk${child}s" ] &&
		! ip netns list | grep -q "^rk${child}[crs]\b"
}

# Explicit nn_cleanup removes our own namespaces and may safely run twice.
cleanup_idempotent() {
	nn_cleanup && nn_cleanup && ! ip netns list | grep -q "^${NN_ID}[crs]\b"
}

# Print the summary and exit 0 (all passed) or 1.
finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" = 0 ] && exit 0
	exit 1
}

main() {
	local t0
	t0=$(nn__ms)
	nn_setup || { echo "FAIL: nn_setup"; exit 1; }
	nn_on_cleanup "rm -rf '$TMP'"
	check "setup: servers listening" start_servers
	check "baseline: TCP over IPv4" tcp4_ok
	check "baseline: TCP over IPv6" tcp6_ok
	check "baseline: UDP client->server" c2s_ok
	check "baseline: UDP server->client" s2c_ok

	nn_blackhole both
	check "blackhole both: IPv4 connect times out" tcp_fails 4 "timed out" 2500
	check "blackhole both: IPv6 connect times out" tcp_fails 6 "timed out" 2500
	check "blackhole both: UDP client->server dropped" not c2s_ok
	nn_restore
	check "restore: TCP over IPv4 and IPv6 work again" eval "tcp4_ok && tcp6_ok"

	nn_blackhole c2s
	check "blackhole c2s: UDP client->server dropped" not c2s_ok
	check "blackhole c2s: UDP server->client passes" s2c_ok
	nn_restore
	nn_blackhole s2c
	check "blackhole s2c: UDP server->client dropped" not s2c_ok
	check "blackhole s2c: UDP client->server passes" c2s_ok
	nn_restore
	check "restore: UDP both ways again" eval "c2s_ok && s2c_ok"

	nn_rst_inject both
	check "rst_inject: IPv4 connect refused < 1 s" tcp_fails 4 "refused" 999
	check "rst_inject: IPv6 connect refused < 1 s" tcp_fails 6 "refused" 999
	check "rst_inject: UDP untouched" c2s_ok
	nn_restore
	check "restore after rst_inject: TCP works" tcp4_ok

	nn_link_down
	check "link_down: IPv4 connect fails" tcp_fails 4 "unreachable" 2500
	nn_link_up
	check "link_up: TCP over IPv4 and IPv6 work again" eval "tcp4_ok && tcp6_ok"

	check "change_client_addr: server sees $NN_C_ALT_ADDR" change_addr_to "$NN_C_ALT_ADDR"
	check "change_client_addr: and back to 198.51.100.2" change_addr_to 198.51.100.2

	check "tbf 8mbit: 2 MiB transfer is rate limited" tbf_limits
	check "netem: delay 300ms applies, and is gone once cleared" netem_check

	check "cleanup: SIGTERM'd child leaves no namespaces" sigterm_cleans
	check "cleanup: explicit nn_cleanup is idempotent" cleanup_idempotent
	nn_log "self-test took $(($(nn__ms) - t0)) ms"
	finish
}

main "$@"
