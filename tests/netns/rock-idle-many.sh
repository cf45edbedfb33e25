#!/usr/bin/env bash
# rock-idle-many.sh: 10,000 idle rocks (or the most one rockd worker holds under the hard descriptor limit) from one client process through one rockd (one worker per CPU) cost what one rock does: at most 2 control packets/s and 300 B/s each way, no TCP segment, none suspended.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
# shellcheck source=idle-lib.sh
. "$here/idle-lib.sh"
ROCKS=${ROCK_IDLE_ROCKS:-10000}
# Sanitized programs connect several times slower: fewer rocks keep the
# test within its time (the figures do not depend on the count).
[ -z "$ROCK_SAN_PRELOAD" ] || ROCKS=${ROCK_IDLE_ROCKS:-2000}
[ "$ROCKS" -le "$IDLE_MAX_ROCKS" ] || ROCKS=$IDLE_MAX_ROCKS
[ "$ROCKS" -ge 1000 ] ||
	t_skip_all "the hard descriptor limit ($(ulimit -Hn)) holds only $ROCKS rocks"
WINDOW=4
rock_netns_up
idle_echod || t_skip_all "the echo backend did not start"
idle_rockd || t_fail_all "rockd did not start"
# rockd as configured by default: one worker per CPU. The client's rocks
# are steered to one of them, so one heartbeat covers them all.
# (rockd counts its affinity; nproc would heed OMP_NUM_THREADS too)
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
[ "$cpus" -le 64 ] || cpus=64
[ "$cpus" -eq 1 ] || wait_for 10 grep -q " $cpus workers started\$" "$t_tmp/rockd-$IDLE_PORT.log"
t_eq "rockd runs one worker per CPU" \
	"$(grep -c ': info: run: .* started$' "$t_tmp/rockd-$IDLE_PORT.log")" "$cpus"
idle_counters || t_skip_all "no iptables counters in the client namespace"

dir="$t_tmp/many"
start=$(now_ms)
idle_hold rock "$ROCKS" "$dir"
t_check "$ROCKS rocks connected and echoed by one client ($(head -c 300 "$dir/err"))" \
	test "$idle_pid" -gt 0
[ "$idle_pid" -gt 0 ] || t_done
nn_log "$ROCKS rocks up in $(($(now_ms) - start)) ms"

# Settled once a second passes with at most two packets each way: every
# rock's first counts confirmed, each side's records stop.
settled=0
for ((i = 0; i < 20 && !settled; i++)); do
	idle_window 1
	[ "$uo_p" -le 3 ] && [ "$ui_p" -le 3 ] && settled=1
done
nn_log "settled after $i s ($uo_p packets out, $ui_p in, in the last second)"
t_eq "the records of $ROCKS new rocks confirmed within 20 s" "$settled" 1

idle_window "$WINDOW"
nn_log "idle ${WINDOW} s: udp out $uo_p packets $uo_b B, in $ui_p packets $ui_b B; tcp out $to_p, in $ti_p"
# One packet per 500 ms each way, one more for the window's edges.
t_check "at most 2 packets/s to rockd ($uo_p in $WINDOW s)" \
	test "$uo_p" -ge "$WINDOW" -a "$uo_p" -le $((2 * WINDOW + 1))
t_check "at most 2 packets/s from rockd ($ui_p in $WINDOW s)" \
	test "$ui_p" -ge "$WINDOW" -a "$ui_p" -le $((2 * WINDOW + 1))
t_check "at most 300 B/s each way ($uo_b and $ui_b B in $WINDOW s)" \
	test "$uo_b" -le $((300 * WINDOW)) -a "$ui_b" -le $((300 * WINDOW))
t_eq "no TCP segment on $ROCKS idle data connections (keepalive off: records pass)" \
	"$to_p $ti_p" "0 0"
rss=$(idle_rss "$idle_pid")
nn_log "client RSS $rss KiB with $ROCKS rocks"
idle_release "$dir"
# A rock the client suspends resets its data connection: rockd suspends
# its side too, so rockd's log tells both. The first few, with why, for
# the reader of a failure.
grep -h -m 5 "CONNECTED -> SUSPENDED" "$t_tmp/rockd-$IDLE_PORT.log" "$dir/client.log"
t_eq "none suspended, at either end" \
	"$(grep -c 'CONNECTED -> SUSPENDED' "$t_tmp/rockd-$IDLE_PORT.log")" 0
t_eq "rockd took every one as a rock" \
	"$(grep -c 'SUSPENDED -> CONNECTED' "$t_tmp/rockd-$IDLE_PORT.log")" "$ROCKS"
t_done
