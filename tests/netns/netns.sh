# netns.sh: network-fault harness for rocks tests (client <-> router <-> server namespaces); source it, do not run it.
# shellcheck shell=bash
#
# Usage: . tests/netns/netns.sh; nn_require_root; nn_setup; nn_on_cleanup 'cmd'; ...
# Faults act in the router, so client and server stay untouched and unaware.
# All functions return non-zero on failure and are safe under `set -eu`.

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	echo "netns.sh is a library: source it from a test script" >&2
	exit 2
fi

# Per-process id so parallel tests (make -j) get distinct namespaces.
NN_ID=${NN_ID:-rk$$}
NN_C_IF=eth0                     # client's interface (in NN_C)
NN_S_IF=eth0                     # server's interface (in NN_S)
NN_R_CIF=rc0                     # router's client-facing interface
NN_R_SIF=rs0                     # router's server-facing interface
NN_C_NET=198.51.100.0/24 NN_S_NET=203.0.113.0/24
NN_C_NET6=2001:db8:1::/64 NN_S_NET6=2001:db8:2::/64
NN_C_GW=198.51.100.1 NN_S_GW=203.0.113.1
NN_C_GW6=2001:db8:1::1 NN_S_GW6=2001:db8:2::1
NN__C_ADDR0=198.51.100.2         # client's first IPv4 address
NN_CHAIN=NNFAULT                 # router chain holding every fault rule
[ -n "${NN_CLEANUPS+x}" ] || NN_CLEANUPS=()

# Log a message to stderr with a millisecond timestamp (keeps test stdout clean).
nn_log() {
	printf '%s nn: %s\n' "$(date +%H:%M:%S.%3N)" "$*" >&2
}

# Current time in milliseconds, for timeouts and measurements.
nn__ms() {
	echo $(( $(date +%s%N) / 1000000 ))
}

# Exit 77 (automake SKIP) unless root, ip netns and iptables-in-netns work.
nn_require_root() {
	local why
	why=$(nn__probe_env) || { echo "SKIP: $why"; exit 77; }
}

# Print why this environment cannot host the harness; succeed silently if it can.
nn__probe_env() {
	local ns="${NN_ID}p" t
	[ "$(id -u)" = 0 ] || { echo "needs root"; return 1; }
	for t in ip iptables ip6tables tc ss; do
		command -v "$t" >/dev/null || { echo "$t not installed"; return 1; }
	done
	ip netns add "$ns" 2>/dev/null || { echo "ip netns add failed"; return 1; }
	if ! ip netns exec "$ns" iptables -w -N NNPROBE >/dev/null 2>&1 ||
		! ip netns exec "$ns" ip6tables -w -N NNPROBE >/dev/null 2>&1; then
		ip netns del "$ns"
		echo "iptables/ip6tables do not work inside a network namespace"
		return 1
	fi
	ip netns del "$ns"
}

# Build client/router/server namespaces, export names/addresses, arm cleanup traps.
nn_setup() {
	NN_C=${NN_ID}c NN_R=${NN_ID}r NN_S=${NN_ID}s
	NN_C_ADDR=$NN__C_ADDR0 NN_C_ALT_ADDR=198.51.100.3 NN_S_ADDR=203.0.113.2
	NN_C_ADDR6=2001:db8:1::2 NN_S_ADDR6=2001:db8:2::2
	export NN_C NN_R NN_S NN_C_ADDR NN_S_ADDR NN_C_ADDR6 NN_S_ADDR6 NN_C_ALT_ADDR
	nn__arm_traps
	if ! { nn__mk_ns && nn__mk_links && nn__cfg_router && nn__cfg_client &&
		nn__cfg_server && nn__mk_chains && nn__wait_carrier; }; then
		nn_log "nn_setup failed"
		return 1
	fi
	nn_log "topology up: $NN_C <-> $NN_R <-> $NN_S"
	# NN_PROFILE=NAME runs any test on that path (profiles.sh).
	if [ -n "${NN_PROFILE:-}" ]; then
		nn_profile "$NN_PROFILE" || return
		nn_log "path profile $NN_PROFILE"
	fi
}

# Wait (max 3 s) until every veth reports carrier: the kernel's linkwatch can
# lag up to 1 s, and qdiscs (tbf) only become active once carrier is on.
nn__wait_carrier() {
	local end
	end=$(( $(nn__ms) + 3000 ))
	until nn__oper_up "$NN_C" "$NN_C_IF" && nn__oper_up "$NN_S" "$NN_S_IF" &&
		nn__oper_up "$NN_R" "$NN_R_CIF" && nn__oper_up "$NN_R" "$NN_R_SIF"; do
		[ "$(nn__ms)" -lt "$end" ] || { nn_log "carrier did not come up"; return 1; }
		sleep 0.05
	done
}

# NS IF: succeed if IF's operstate is "up".
nn__oper_up() {
	ip -n "$1" -o link show dev "$2" 2>/dev/null | grep -q ' state UP '
}

# Install EXIT/INT/TERM/HUP traps; a pre-existing EXIT trap is kept as a cleanup.
nn__arm_traps() {
	local old words
	old=$(trap -p EXIT)
	if [ -n "$old" ] && [[ "$old" != *nn_cleanup* ]]; then
		eval "words=($old)" # trap -- 'CMD' EXIT
		nn_on_cleanup "${words[2]}"
	fi
	trap 'nn_cleanup' EXIT
	trap 'nn__on_signal 129' HUP
	trap 'nn__on_signal 130' INT
	trap 'nn__on_signal 143' TERM
}

# Signal handler: clean up, then exit with the conventional 128+signal status.
nn__on_signal() {
	nn_cleanup "$1"
	trap - EXIT
	exit "$1"
}

# Register a shell command for nn_cleanup to run (last registered runs first).
nn_on_cleanup() {
	NN_CLEANUPS+=("$1")
}

# Create the three namespaces with loopback up and IPv6 DAD off (no 1-2 s stalls).
nn__mk_ns() {
	local ns
	for ns in "$NN_C" "$NN_R" "$NN_S"; do
		ip netns add "$ns" && ip -n "$ns" link set lo up &&
			ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 \
				net.ipv6.conf.default.accept_dad=0 >/dev/null || return 1
	done
}

# Create the two veth pairs directly inside the namespaces (nothing in the root ns).
nn__mk_links() {
	ip -n "$NN_R" link add "$NN_R_CIF" type veth peer name "$NN_C_IF" netns "$NN_C" &&
		ip -n "$NN_R" link add "$NN_R_SIF" type veth peer name "$NN_S_IF" netns "$NN_S"
}

# Address both router interfaces and turn on IPv4/IPv6 forwarding.
nn__cfg_router() {
	ip netns exec "$NN_R" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 >/dev/null &&
		nn__addr "$NN_R" "$NN_R_CIF" "$NN_C_GW" "$NN_C_GW6" &&
		nn__addr "$NN_R" "$NN_R_SIF" "$NN_S_GW" "$NN_S_GW6"
}

# Address the client and point its default routes at the router.
nn__cfg_client() {
	nn__addr "$NN_C" "$NN_C_IF" "$NN_C_ADDR" "$NN_C_ADDR6" &&
		nn__routes "$NN_C" "$NN_C_GW" "$NN_C_GW6"
}

# Address the server and point its default routes at the router.
nn__cfg_server() {
	nn__addr "$NN_S" "$NN_S_IF" "$NN_S_ADDR" "$NN_S_ADDR6" &&
		nn__routes "$NN_S" "$NN_S_GW" "$NN_S_GW6"
}

# NS IF V4 V6: give IF a /24 and a /64 (nodad: usable at once) and bring it up.
nn__addr() {
	ip -n "$1" addr add "$3/24" dev "$2" &&
		ip -n "$1" -6 addr add "$4/64" dev "$2" nodad &&
		ip -n "$1" link set "$2" up
}

# NS GW4 GW6: (re)install both default routes.
nn__routes() {
	ip -n "$1" route replace default via "$2" &&
		ip -n "$1" -6 route replace default via "$3"
}

# Create the harness's chains in the router, jumped to from FORWARD: the
# faults (NNFAULT, emptied by nn_restore), then the path (NNPATH: what the
# profile drops and what goes to nfq-netem), so a blackhole drops before
# the path delays and packets already on the path still arrive.
nn__mk_chains() {
	local ipt c
	for ipt in iptables ip6tables; do
		for c in "$NN_CHAIN" NNPATH; do
			nn_r "$ipt" -w -N "$c" && nn_r "$ipt" -w -A FORWARD -j "$c" || return 1
		done
	done
}

# Run a command inside the client namespace.
nn_c() {
	ip netns exec "$NN_C" "$@"
}

# Run a command inside the router namespace.
nn_r() {
	ip netns exec "$NN_R" "$@"
}

# Run a command inside the server namespace.
nn_s() {
	ip netns exec "$NN_S" "$@"
}

# [both|c2s|s2c]: silently drop all IPv4+IPv6 traffic (TCP, UDP, ...) in that direction.
nn_blackhole() {
	nn__fault "${1:-both}" -j DROP
}

# [both|c2s|s2c]: drop only TCP in that direction (a NAT or firewall that lost
# the connection's state); UDP passes.
nn_tcp_blackhole() {
	nn__fault "${1:-both}" -p tcp -j DROP
}

# [both|c2s|s2c]: router answers TCP segments sent in that direction with a RST
# back to their sender (c2s: the client gets RSTs, s2c: the server does); UDP passes.
nn_rst_inject() {
	nn__fault "${1:-both}" -p tcp -j REJECT --reject-with tcp-reset
}

# Remove every fault rule (blackhole, RST) the harness added; nothing else.
# NN_V4_MS: when it took effect for IPv4 (ms), for measurements.
nn_restore() {
	nn_r iptables -w -F "$NN_CHAIN" || return 1
	NN_V4_MS=$(nn__ms)
	nn_r ip6tables -w -F "$NN_CHAIN"
}

# DIR RULE...: append RULE to the fault chain for the chosen direction(s),
# IPv4 first, then IPv6; NN_V4_MS: when IPv4 had it (ms).
nn__fault() {
	local dir=$1
	shift
	case $dir in
	both | c2s | s2c) ;;
	*) nn_log "bad direction '$dir' (want both, c2s or s2c)"; return 2 ;;
	esac
	nn__rules iptables "$dir" "$NN_C_NET" "$NN_S_NET" "$@" || return 1
	NN_V4_MS=$(nn__ms)
	nn__rules ip6tables "$dir" "$NN_C_NET6" "$NN_S_NET6" "$@"
}

# IPTABLES DIR CLIENT_NET SERVER_NET RULE...: the rules of one family; both
# directions in one rule, so they start together.
nn__rules() {
	local ipt=$1 dir=$2 c=$3 s=$4
	shift 4
	case $dir in
	both) nn_r "$ipt" -w -A "$NN_CHAIN" "$@" ;;
	c2s) nn_r "$ipt" -w -A "$NN_CHAIN" -s "$c" -d "$s" "$@" ;;
	s2c) nn_r "$ipt" -w -A "$NN_CHAIN" -s "$s" -d "$c" "$@" ;;
	esac
}

# Take the client's link down (the kernel drops its routes, IPv6 addresses too).
nn_link_down() {
	ip -n "$NN_C" link set "$NN_C_IF" down
}

# Bring the client's link up and re-add whatever addresses/routes the kernel dropped.
nn_link_up() {
	ip -n "$NN_C" link set "$NN_C_IF" up && nn__fix_client && nn__wait_carrier
}

# Re-add missing client addresses, then the default routes.
nn__fix_client() {
	[ -n "$(nn__client_v4)" ] || ip -n "$NN_C" addr add "$NN_C_ADDR/24" dev "$NN_C_IF" || return 1
	if ! ip -n "$NN_C" -6 addr show dev "$NN_C_IF" | grep -q "$NN_C_ADDR6/"; then
		ip -n "$NN_C" -6 addr add "$NN_C_ADDR6/64" dev "$NN_C_IF" nodad || return 1
	fi
	nn__routes "$NN_C" "$NN_C_GW" "$NN_C_GW6"
}

# Print the client's current IPv4 address (empty if none).
nn__client_v4() {
	ip -n "$NN_C" -4 -o addr show dev "$NN_C_IF" | awk '{ sub("/.*", "", $4); print $4; exit }'
}

# Swap the client's IPv4 address (.2 <-> .3), like a NAT rebinding or a roaming
# host; prints the new address and sets NN_C_ADDR (not when run in $(...)).
nn_change_client_addr() {
	local cur new=$NN_C_ALT_ADDR
	cur=$(nn__client_v4)
	[ "$cur" != "$NN_C_ALT_ADDR" ] || new=$NN__C_ADDR0
	if [ -n "$cur" ]; then
		ip -n "$NN_C" addr del "$cur/24" dev "$NN_C_IF" || return 1
	fi
	ip -n "$NN_C" addr add "$new/24" dev "$NN_C_IF" &&
		ip -n "$NN_C" route replace default via "$NN_C_GW" || return 1
	NN_C_ADDR=$new
	echo "$new"
}

# Succeed only if a netem qdisc can really be added here (probed once, cached).
nn_has_netem() {
	if [ -z "${NN__NETEM:-}" ]; then
		NN__NETEM=1
		if nn__probe_netem; then NN__NETEM=0; fi
	fi
	return "$NN__NETEM"
}

# Try adding netem on a veth in a throwaway namespace, then delete it.
nn__probe_netem() {
	local ns="${NN_ID}q" rc
	ip netns add "$ns" 2>/dev/null || return 1
	ip -n "$ns" link add nq0 type veth peer name nq1 2>/dev/null &&
		ip -n "$ns" link set nq0 up &&
		tc -n "$ns" qdisc add dev nq0 root netem delay 1ms 2>/dev/null
	rc=$?
	ip netns del "$ns"
	return "$rc"
}

# DIR: the router's egress device for that direction (c2s leaves toward
# the server, s2c toward the client), and the NFQUEUE number nfq-netem uses.
nn__egress() { if [ "$1" = c2s ]; then echo "$NN_R_SIF"; else echo "$NN_R_CIF"; fi; }
nn__ingress() { if [ "$1" = c2s ]; then echo "$NN_R_CIF"; else echo "$NN_R_SIF"; fi; }
nn__queue() { if [ "$1" = c2s ]; then echo 0; else echo 1; fi; }

# both|c2s|s2c: the directions named, one per line (status 2 if bad).
nn__dirs() {
	case $1 in
	both) printf 'c2s\ns2c\n' ;;
	c2s | s2c) echo "$1" ;;
	*) nn_log "bad direction '$1' (want both, c2s or s2c)"; return 2 ;;
	esac
}

# DIR OPTIONS...: netem with tc-netem(8)'s OPTIONS on the router's egress in
# direction DIR (both, c2s, s2c), replacing what that direction had. The
# kernel's netem where it exists, else nfq-netem (NFQUEUE, the same options
# and meaning); 77 with a SKIP line when neither can run.
nn_netem() {
	local dir=$1 d dirs
	shift
	dirs=$(nn__dirs "$dir") || return 2
	if nn_has_netem; then
		for d in $dirs; do
			tc -n "$NN_R" qdisc replace dev "$(nn__egress "$d")" root netem "$@" || return 1
		done
		return 0
	fi
	nn__nfq_start || return $?
	local -A old=()
	for d in c2s s2c; do
		[ -z "${NN__NFQ_OPTS[$d]+x}" ] || old[$d]=${NN__NFQ_OPTS[$d]}
	done
	for d in $dirs; do
		NN__NFQ_OPTS[$d]="$*"
	done
	nn__nfq_apply && return 0
	# Refused: the path stays as it was.
	for d in $dirs; do
		if [ -n "${old[$d]+x}" ]; then NN__NFQ_OPTS[$d]=${old[$d]}; else unset "NN__NFQ_OPTS[$d]"; fi
	done
	nn__nfq_apply
	return 1
}

# SEED: nfq-netem's random draws start again from SEED, TCP and other
# packets each from a stream of their own: two runs each preceded by the
# same seed give their n-th TCP packet the same fate (paired benchmark
# runs). Status 1 with the kernel's netem, which takes no seed.
nn_netem_reseed() {
	nn_has_netem && return 1
	[ -n "${NN__NFQ_DIR:-}" ] || return 1
	NN__NFQ_SEED=$1
	nn__nfq_apply
}

# [DIR]: no netem in direction DIR (default both).
nn_netem_clear() {
	local d dirs
	dirs=$(nn__dirs "${1:-both}") || return 2
	if nn_has_netem; then
		for d in $dirs; do
			tc -n "$NN_R" qdisc del dev "$(nn__egress "$d")" root 2>/dev/null
		done
		return 0
	fi
	[ -n "${NN__NFQ_DIR:-}" ] || return 0
	for d in $dirs; do
		unset "NN__NFQ_OPTS[$d]"
	done
	nn__nfq_apply
}

[ -n "${NN__NFQ_OPTS+x}" ] || declare -A NN__NFQ_OPTS=()

# nfq-netem (tests/netem), from the build tree.
nn__nfq_bin() {
	echo "${NN_NFQ_NETEM:-${top_builddir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/tests/netem/nfq-netem}"
}

# Start nfq-netem in the router once; it dies with the namespace.
nn__nfq_start() {
	local bin i starter
	[ -z "${NN__NFQ_DIR:-}" ] || return 0
	bin=$(nn__nfq_bin)
	if [ ! -x "$bin" ]; then
		echo "SKIP: no netem in this kernel and $bin is not built (Debian package libnetfilter-queue-dev)"
		return 77
	fi
	NN__NFQ_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nfq-netem.XXXXXX") || return 1
	nn_on_cleanup "rm -rf '$NN__NFQ_DIR'"
	: >"$NN__NFQ_DIR/conf"
	# ip netns exec may fork: nfq-netem writes its own pid when ready.
	nn_r "$bin" -r "$NN__NFQ_DIR/ready" "$NN__NFQ_DIR/conf" 2>"$NN__NFQ_DIR/log" &
	starter=$!
	for ((i = 0; i < 100; i++)); do
		NN__NFQ_PID=$(cat "$NN__NFQ_DIR/ready" 2>/dev/null)
		[ -z "$NN__NFQ_PID" ] || return 0
		kill -0 "$starter" 2>/dev/null || break
		sleep 0.05
	done
	echo "SKIP: no netem in this kernel, and nfq-netem could not start: $(tail -n 1 "$NN__NFQ_DIR/log")"
	NN__NFQ_DIR=
	return 77
}

# Write nfq-netem's configuration from NN__NFQ_OPTS and make it re-read
# it, then queue exactly the directions that have options: a queue must be
# bound before a packet is sent to it (an unbound queue drops).
nn__nfq_apply() {
	local d conf="$NN__NFQ_DIR/conf" before
	: >"$conf.new"
	[ -z "${NN__NFQ_SEED:-}" ] || echo "seed $NN__NFQ_SEED" >>"$conf.new"
	for d in c2s s2c; do
		[ -z "${NN__NFQ_OPTS[$d]+x}" ] || echo "$(nn__queue "$d") ${NN__NFQ_OPTS[$d]}" >>"$conf.new"
	done
	mv "$conf.new" "$conf"
	before=$(wc -l <"$NN__NFQ_DIR/log")
	kill -HUP "$NN__NFQ_PID" && nn__nfq_wait_applied "$before" && nn__path_rules
}

# LINES: wait until nfq-netem has logged, after the first LINES lines of
# its log, one line per queue of the configuration just written; fail if
# it refused a line instead.
nn__nfq_wait_applied() {
	local i want new seeded=0
	want=$(grep -c '^[0-9]' "$NN__NFQ_DIR/conf")
	grep -q '^seed ' "$NN__NFQ_DIR/conf" && seeded=1
	for ((i = 0; i < 250; i++)); do
		new=$(tail -n +"$(($1 + 1))" "$NN__NFQ_DIR/log")
		if grep -q 'not (fully) applied' <<<"$new"; then
			nn_log "nfq-netem refused the options: $(grep -m1 ':[0-9]*: ' <<<"$new")"
			return 1
		fi
		if [ "$(grep -c '^nfq-netem: queue [0-9]*: limit' <<<"$new")" -ge "$want" ] &&
			[ "$(grep -c '^nfq-netem: random draws from seed' <<<"$new")" -ge "$seeded" ]; then
			return 0
		fi
		sleep 0.02
	done
	nn_log "nfq-netem did not take its new options"
	return 1
}

# Rebuild the router's NNPATH chain from the harness's state: UDP dropped
# (nn_udp_block), then each direction with nfq-netem options to its queue.
nn__path_rules() {
	local ipt d
	for ipt in iptables ip6tables; do
		nn_r "$ipt" -w -F NNPATH || return 1
		[ -z "${NN__UDP_BLOCKED:-}" ] || nn_r "$ipt" -w -A NNPATH -p udp -j DROP || return 1
		[ -n "${NN__NFQ_DIR:-}" ] || continue
		for d in c2s s2c; do
			[ -n "${NN__NFQ_OPTS[$d]+x}" ] || continue
			nn_r "$ipt" -w -A NNPATH -i "$(nn__ingress "$d")" \
				-j NFQUEUE --queue-num "$(nn__queue "$d")" || return 1
		done
	done
}

# Counters of nfq-netem's queues (in, lost, duplicated, reordered), on stdout.
nn_netem_stats() {
	[ -n "${NN__NFQ_PID:-}" ] || return 0
	kill -USR1 "$NN__NFQ_PID" && sleep 0.1 && grep ': in [0-9]' "$NN__NFQ_DIR/log" | tail -n 2
}

# Drop UDP both ways in the router until nn_udp_unblock (nn_restore leaves
# it in place): a path whose firewall passes only TCP.
nn_udp_block() {
	NN__UDP_BLOCKED=1
	nn__path_rules
}

nn_udp_unblock() {
	NN__UDP_BLOCKED=
	nn__path_rules
}

# UDP packets the router dropped for nn_udp_block (IPv4), on stdout.
nn_udp_dropped() {
	nn_r iptables -w -L NNPATH -v -n -x | awk '$3 == "DROP" && $4 ~ /^(udp|17)$/ { print $1; exit }'
}

# shellcheck source=profiles.sh
. "$(dirname "${BASH_SOURCE[0]}")/profiles.sh"

# RATE BURST LATENCY: token-bucket rate limit on the router's server-facing egress.
nn_tbf() {
	tc -n "$NN_R" qdisc replace dev "$NN_R_SIF" root tbf rate "$1" burst "$2" latency "$3"
}

# Remove any netem/tbf qdisc the harness put on the router.
nn_clear_qdisc() {
	tc -n "$NN_R" qdisc del dev "$NN_R_SIF" root 2>/dev/null || true
}

# NS ADDR PORT [TIMEOUT_S]: wait (50 ms polls, default 5 s, fractions ok) for a TCP listener.
nn_wait_port() {
	local ns=$1 addr=$2 port=$3 end
	end=$(awk -v t="${4:-5}" 'BEGIN { printf "%d", t * 1000 }') # mawk: %d is 32-bit
	end=$(($(nn__ms) + end))
	until nn__listening "$ns" "$addr" "$port"; do
		if [ "$(nn__ms)" -ge "$end" ]; then
			nn_log "no listener on $addr:$port in $ns after ${4:-5}s"
			return 1
		fi
		sleep 0.05
	done
}

# NS ADDR PORT: succeed if a TCP socket listens on ADDR:PORT or a matching wildcard.
nn__listening() {
	ip netns exec "$1" ss -Hltn "sport = :$3" 2>/dev/null | awk -v a="${2#[}" '
		BEGIN { sub(/\]$/, "", a) }
		{ l = $4; sub(/:[0-9]+$/, "", l); sub(/%.*/, "", l); gsub(/[][]/, "", l)
		  if (l == a || l == "*" || l == "::" || (l == "0.0.0.0" && a !~ /:/)) f = 1 }
		END { exit !f }'
}

# [STATUS]: tear everything down, whatever state we are in: registered cleanups
# (LIFO, each sees the exit status in $?), processes left in the namespaces,
# the namespaces themselves. Idempotent.
nn_cleanup() {
	local rc=${1:-$?} i ns
	for ((i = ${#NN_CLEANUPS[@]} - 1; i >= 0; i--)); do
		nn__run_cleanup "$rc" "${NN_CLEANUPS[i]}"
	done
	NN_CLEANUPS=()
	for ns in "${NN_ID}c" "${NN_ID}r" "${NN_ID}s" "${NN_ID}p" "${NN_ID}q"; do
		nn__ns_exists "$ns" || continue
		nn__kill_ns "$ns"
		ip netns del "$ns" 2>/dev/null || true
	done
	# The path went with the router: a later nn_setup starts afresh.
	NN__NFQ_DIR= NN__NFQ_PID= NN__UDP_BLOCKED=
	NN__NFQ_OPTS=()
	return 0
}

# RC CMD: eval CMD with $? preset to RC (errexit-safe: it is an if condition).
nn__run_cleanup() {
	if nn__status "$1"; then
		eval "$2" || true
	else
		eval "$2" || true
	fi
}

# RC: return RC.
nn__status() {
	return "$1"
}

# NS: succeed if the named namespace exists.
nn__ns_exists() {
	ip netns list 2>/dev/null | awk -v n="$1" '$1 == n { f = 1 } END { exit !f }'
}

# NS: SIGTERM every process in NS, SIGKILL whatever survives 1 s.
nn__kill_ns() {
	local pids i
	pids=$(ip netns pids "$1" 2>/dev/null)
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086 # word splitting of the pid list is wanted
	kill -TERM $pids 2>/dev/null
	for ((i = 0; i < 20; i++)); do
		pids=$(ip netns pids "$1" 2>/dev/null)
		[ -n "$pids" ] || return 0
		sleep 0.05
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null
	return 0
}
