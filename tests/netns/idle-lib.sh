# idle-lib.sh: many idle rocks from one client process through one rockd, and the packets and bytes they cost each way (iptables counters in the client namespace); for rock-idle-many.sh and tests/bench/idle-bench.sh.
# shellcheck shell=bash
# Sourced after rock-lib.sh, with the namespaces up.

TRAFFIC="$top_builddir/tests/traffic"
ECHOD="$top_builddir/tests/echod"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] && [ -x "$ECHOD" ] ||
	t_skip_all "rockd, tests/traffic or tests/echod not built"
# rockd spends two descriptors per rock (client and backend), and takes
# the hard limit: under a hard limit of 20,000 (this machine's, which a
# container's root cannot raise) it holds 9,900 at most.
IDLE_MAX_ROCKS=${IDLE_MAX_ROCKS:-$((($(ulimit -Hn) - 200) / 2))}

# The port rockd listens on (TCP and its control channel's UDP).
IDLE_PORT=7000

idle_echod() {
	nn_s "$ECHOD" 9000 2>"$t_tmp/echod.err" &
	pids+=($!)
	nn_wait_port "$NN_S" 127.0.0.1 9000 5
}

# idle_rockd: $ROCKD on $IDLE_PORT in front of echod, in the server
# namespace; its pid in $idle_rockd_pid.
idle_rockd() {
	local base="$t_tmp/rockd-$IDLE_PORT"
	rm -f "$base.pid"
	printf 'listen %s:%s backend 127.0.0.1:9000\nmax-rocks %s\n' "$NN_S_ADDR" \
		"$IDLE_PORT" "$IDLE_MAX_ROCKS" >"$base.conf"
	nn_s "$ROCKD" -F -f "$base.conf" -p "$base.pid" 2>"$base.log" &
	pids+=($!)
	wait_for 5 test -s "$base.pid" || return 1
	nn_wait_port "$NN_S" "$NN_S_ADDR" "$IDLE_PORT" 5 || return 1
	idle_rockd_pid=$(cat "$base.pid")
}

# idle_counters: count UDP and TCP packets and bytes (IP lengths) each
# way at the client.
idle_counters() {
	local c
	for c in IDLEOUT IDLEIN; do
		nn_c iptables -w -N "$c" || return 1
		nn_c iptables -w -A "$c" -p udp -j RETURN || return 1
		nn_c iptables -w -A "$c" -p tcp -j RETURN || return 1
	done
	nn_c iptables -w -I OUTPUT -j IDLEOUT && nn_c iptables -w -I INPUT -j IDLEIN
}

idle_zero() { nn_c iptables -w -Z IDLEOUT && nn_c iptables -w -Z IDLEIN; }

# idle_read CHAIN PROTO: "packets bytes" counted since idle_zero (the
# listing names protocols by name or number, as iptables' version does).
idle_read() {
	local num=17
	[ "$2" = tcp ] && num=6
	nn_c iptables -w -nvxL "$1" |
		awk -v p="$2" -v n="$num" '$4 == p || $4 == n { print $1, $2; exit }'
}

# idle_hold KIND N DIR: N connections held idle by one client process
# (KIND rock: under the rock wrapper; plain: the same program as plain TCP,
# through rockd's plain relay); returns once all are connected and echoed,
# the client's pid in $idle_pid (0 on failure).
idle_hold() {
	local kind=$1 n=$2 dir=$3 wait_s
	local -a wrap=("$ROCK")
	mkdir -p "$dir" && rm -f "$dir/held" "$dir/go"
	[ "$kind" = plain ] && wrap=()
	ROCK_LOG="$dir/client.log" nn_c bash -c 'ulimit -Sn "$(ulimit -Hn)" && exec "$@"' \
		hold "${wrap[@]}" "$TRAFFIC" hold "$NN_S_ADDR" "$IDLE_PORT" "$n" "$dir" \
		>"$dir/out" 2>"$dir/err" &
	pids+=($!)
	wait_s=$((10 + n / 200))
	idle_pid=0
	wait_for "$wait_s" test -s "$dir/held" || return 1
	idle_pid=$(cat "$dir/held")
}

# idle_release DIR: the held connections closed, the client gone.
idle_release() {
	touch "$1/go"
	wait_for 60 test ! -d "/proc/$idle_pid"
}

# idle_window SECONDS: the counters over that long, in uo_p uo_b (UDP
# packets and bytes to rockd), ui_p ui_b (from rockd), to_p and ti_p (TCP
# segments each way).
idle_window() {
	idle_zero
	sleep "$1"
	read -r uo_p uo_b < <(idle_read IDLEOUT udp)
	read -r ui_p ui_b < <(idle_read IDLEIN udp)
	read -r to_p _ < <(idle_read IDLEOUT tcp)
	read -r ti_p _ < <(idle_read IDLEIN tcp)
}

# RSS of a process, KiB.
# (with its children: rockd's workers, one per CPU by default)
idle_rss() {
	local p
	for p in "$1" $(pgrep -P "$1"); do cat "/proc/$p/status"; done 2>/dev/null |
		awk '/^VmRSS:/ { s += $2 } END { print s + 0 }'
}
