#!/usr/bin/env bash
# idle-bench.sh: what N idle rocks from one client process to one rockd cost: control packets/s and bytes/s each way, client RSS per rock, against the same program's plain TCP connections and (measured, or computed from its format) version 4's per-rock heartbeats; prints tables, never a verdict.
#
# Usage (root, from the build tree): tests/bench/idle-bench.sh [N...]
#   N defaults to 1 100 1000 and the most one rockd holds here (9,900 under
#   a hard limit of 20,000 descriptors: two per rock; IDLE_MAX_ROCKS).
# Environment:
#   IDLE_WINDOW   seconds counted (default 6)
#   IDLE_SETTLE   seconds waited after the last connect (default 3 + N/1000)
#   IDLE_OLD      another build tree (e.g. version 4's): its rock wrapper and
#                 rockd measured the same way, in the same run, as a second
#                 table; without it version 4's figures are computed.
#
# Columns, per N, measured in the client namespace by iptables (IP bytes,
# headers included) over the window:
#   udp pkt/s, udp B/s   out (client to rockd) / in (rockd to client)
#   tcp pkt/s            segments on the data connections (keepalives)
#   v4 pkt/s, v4 B/s     version 4 for N idle rocks, computed: one 60-byte
#                        record per rock per 500 ms, 19 per packet, each way
#   RSS/rock             client RSS growth per connection, KiB, (RSS(N) -
#                        RSS(1)) / (N - 1): rock and plain TCP (the same
#                        program without rock, through rockd's plain relay)
# Idle plain TCP connections send nothing: 0 packets/s is their column.
set -u
here=$(cd "$(dirname "$0")/../netns" && pwd)
# shellcheck source=tests/netns/rock-lib.sh
. "$here/rock-lib.sh"
# shellcheck source=tests/netns/idle-lib.sh
. "$here/idle-lib.sh"
ns=("$@")
[ ${#ns[@]} -gt 0 ] || ns=(1 100 1000 "$IDLE_MAX_ROCKS")
window=${IDLE_WINDOW:-6}
rock_netns_up
idle_echod || t_skip_all "the echo backend did not start"
idle_counters || t_skip_all "no iptables counters in the client namespace"

# rss_of KIND N: the client's RSS (KiB) with N idle connections.
rss_of() {
	local dir="$t_tmp/$IDLE_PORT-$1-$2" r
	idle_hold "$1" "$2" "$dir" || { echo "$1 N=$2: the client did not hold ($(head -c 300 "$dir/err"))" >&2; return 1; }
	sleep 1
	r=$(idle_rss "$idle_pid")
	idle_release "$dir"
	echo "$r"
}

# table LABEL: one row per N with $ROCK and $ROCKD.
# rockd_restart: a fresh rockd, so that its RSS growth is one N's alone
# (a rockd that held more before reuses what it freed).
rockd_restart() {
	if [ -n "${idle_rockd_pid:-}" ]; then
		kill -TERM "$idle_rockd_pid"
		wait_for 10 test ! -d "/proc/$idle_rockd_pid"
	fi
	idle_rockd
}

# CPU ticks of a process and its children (rockd's workers).
ticks() {
	local p
	for p in "$1" $(pgrep -P "$1"); do cat "/proc/$p/stat"; done 2>/dev/null |
		awk '{ s += $14 + $15 } END { print s + 0 }'
}

table() {
	local n dir rss rss1 plain plain1 drss0 drss dt0 dt1
	idle_rockd_pid=
	rockd_restart || { echo "$1: rockd did not start"; return 1; }
	echo "$1 (rock $ROCK, rockd $ROCKD)"
	printf '%7s | %-21s | %-21s | %-11s | %-18s | %-20s | %-23s | %s\n' N \
		"udp pkt/s out/in" "udp B/s out/in" "tcp pkt/s" "v4 pkt/s (x)" \
		"v4 B/s (x)" "RSS/rock KiB rock/plain" "rockd KiB/session, CPU"
	rss1=$(rss_of rock 1) || rss1=0
	plain1=$(rss_of plain 1) || plain1=0
	for n in "${ns[@]}"; do
		dir="$t_tmp/$IDLE_PORT-rock-$n"
		rockd_restart || { echo "N=$n: rockd did not start"; continue; }
		drss0=$(idle_rss "$idle_rockd_pid")
		if ! idle_hold rock "$n" "$dir"; then
			echo "N=$n: the client did not hold its rocks ($(head -c 300 "$dir/err"))"
			continue
		fi
		sleep "${IDLE_SETTLE:-$((3 + n / 1000))}"
		dt0=$(ticks "$idle_rockd_pid")
		idle_window "$window"
		dt1=$(ticks "$idle_rockd_pid")
		rss=$(idle_rss "$idle_pid")
		drss=$(idle_rss "$idle_rockd_pid")
		idle_release "$dir"
		plain=$(rss_of plain "$n") || plain=0
		awk -v n="$n" -v w="$window" -v uop="$uo_p" -v uob="$uo_b" -v uip="$ui_p" \
			-v uib="$ui_b" -v top="$to_p" -v tip="$ti_p" -v rss="$rss" \
			-v rss1="$rss1" -v plain="$plain" -v plain1="$plain1" -v drss0="$drss0" \
			-v drss="$drss" -v dt="$((dt1 - dt0))" -v hz="$(getconf CLK_TCK)" 'BEGIN {
			pk = int((n + 18) / 19)
			v4p = 2 * pk; v4b = 2 * (n * 60 + pk * (6 + 28))
			per = n > 1 ? (rss - rss1) / (n - 1) : 0
			pper = n > 1 ? (plain - plain1) / (n - 1) : 0
			printf "%7d | %9.2f / %-9.2f | %9.0f / %-9.0f | %4.1f / %-4.1f | %6d (x%-8.1f) | %8d (x%-8.1f) | %9.2f / %-9.2f | %6.2f, %.1f %%\n",
			    n, uop / w, uip / w, uob / w, uib / w, top / w, tip / w,
			    v4p, v4p / ((uop + uip) / 2 / w + 1e-9), v4b,
			    v4b / ((uob + uib) / 2 / w + 1e-9), per, pper,
			    (drss - drss0) / n, dt / hz / w * 100
		}'
	done
	kill -TERM "$idle_rockd_pid"
	wait_for 10 test ! -d "/proc/$idle_rockd_pid"
}

table "this build"
if [ -n "${IDLE_OLD:-}" ]; then
	ROCK="$IDLE_OLD/tools/rock" ROCKD="$IDLE_OLD/daemon/rockd" IDLE_PORT=7001 \
		table "IDLE_OLD"
fi
echo "(x: the v4 figure over this table's, mean of both ways)"
t_ok "idle benchmark ran"
t_done
