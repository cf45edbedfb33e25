#!/usr/bin/env bash
# rockd-capacity.sh: rockd started with a soft limit of 1,024 descriptors raises it to the hard limit, says its capacity, and holds 3,000 rocks at once (before: 298, then BUSY), each echoed byte-exact.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
ECHOD="$top_builddir/tests/echod"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] && [ -x "$ECHOD" ] ||
	t_skip_all "rockd, tests/traffic or tests/echod not built"
ROCKS=${ROCKD_CAPACITY_ROCKS:-3000}
# rockd needs two descriptors per rock, the client one: room for both.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((2 * ROCKS + 1024)) ] ||
	t_skip_all "the hard descriptor limit ($hard) is below $((2 * ROCKS + 1024))"
rock_netns_up

nn_s "$ECHOD" 9000 2>"$t_tmp/echod.err" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 || t_skip_all "the echo backend did not start"
rm -f "$t_tmp/rockd.pid"
nn_s bash -c 'ulimit -Sn 1024 && exec "$@"' rockd "$ROCKD" -F -v -p "$t_tmp/rockd.pid" \
	--listen 7000 --backend 127.0.0.1:9000 2>"$t_tmp/rockd.log" &
pids+=($!)
wait_for 20 test -s "$t_tmp/rockd.pid" || t_fail_all "rockd did not start"
nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 20 || t_fail_all "rockd did not listen"
rockd_pid=$(cat "$t_tmp/rockd.pid")

# The processes that serve: the workers (one per CPU), or rockd alone.
servers=$(pgrep -P "$rockd_pid" | tr '\n' ' ')
[ -n "$servers" ] || servers=$rockd_pid
limits=$(for p in $servers; do awk '/Max open files/ { print $4 }' "/proc/$p/limits"; done | sort -u)
t_eq "rockd started at a soft limit of 1024 and each worker ($servers) raised it to the hard limit" \
	"$limits" "$hard"
# One capacity line per worker; one client's rocks all go to one of them.
capacity=$(sed -n 's/.*capacity: \([0-9]*\) rocks.*/\1/p' "$t_tmp/rockd.log" | sort -n | head -n 1)
t_check "each worker says its capacity: at least ${capacity:-nothing} rocks ($(grep -o 'capacity: .*' "$t_tmp/rockd.log" | head -n 1))" \
	test "${capacity:-0}" -ge "$ROCKS" -a "$(grep -c 'capacity: ' "$t_tmp/rockd.log")" -eq "$(echo "$servers" | wc -w)"

# All at once: each connected and echoed before any is closed.
start=$(now_ms)
ROCK_LOG="$t_tmp/many.log" t_foreign nn_c bash -c 'ulimit -Sn $((2 * $1 + 1024)) && shift && exec "$@"' \
	many "$ROCKS" "$ROCK" "$TRAFFIC" many "$NN_S_ADDR" 7000 "$ROCKS" 1000 \
	>"$t_tmp/many.out" 2>"$t_tmp/many.err" &
many_pid=$! pids+=($!)
if wait_pid "$many_pid" 300; then rc=$waited; else rc=124; fi
nn_log "$ROCKS rocks echoed and closed in $(($(now_ms) - start)) ms"
t_eq "$ROCKS rocks at once, 1000 bytes echoed exact on each ($(head -c 200 "$t_tmp/many.err"))" "$rc" 0
t_eq "rockd took every one as a rock" "$(grep -c 'client connected, backend' "$t_tmp/rockd.log")" "$ROCKS"
t_eq "none refused or pushed out" "$(grep -c 'refusing another\|to make room' "$t_tmp/rockd.log")" 0
t_eq "the client's rocks were all rocks" "$(grep -c 'connection stays plain\|plain TCP' "$t_tmp/many.log")" 0
t_done
