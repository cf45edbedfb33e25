#!/usr/bin/env bash
# rock-probe-lost.sh: a probe whose end (FIN) is lost until rockd has taken it for a silent plain client still finds the rockd: the client sees its FIN went unheard and probes again, for a backend that speaks first and one that does not.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
IO="$top_builddir/tests/rock-io"
[ -x "$ROCKD" ] && [ -x "$IO" ] || t_skip_all "rockd or tests/rock-io not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
rock_netns_up
nn_on_cleanup drop_rules

# shellcheck disable=SC2317 # run by nn_cleanup
drop_rules() { nn_c iptables -w -F OUTPUT 2>/dev/null; }

nn_s socat TCP4-LISTEN:9301,bind=127.0.0.1,reuseaddr,fork SYSTEM:'echo banner; cat' 2>/dev/null &
pids+=($!)
nn_s socat TCP4-LISTEN:9302,bind=127.0.0.1,reuseaddr,fork EXEC:cat 2>/dev/null &
pids+=($!)
nn_s "$ROCKD" -F -v --listen 7301 --backend 127.0.0.1:9301 \
	--listen 7302 --backend 127.0.0.1:9302 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9301 5 && nn_wait_port "$NN_S" 127.0.0.1 9302 5 ||
	t_skip_all "the echo backends did not start"
nn_wait_port "$NN_S" "$NN_S_ADDR" 7302 20 || t_fail_all "rockd did not start (log: $(tail -n 3 "$t_tmp/rockd.log"))"

# The client's first two FINs to PORT are dropped (each rule drops the
# first packet it sees, then lets every other pass): the probe's end
# reaches rockd after its wait for a silent client's first bytes (300 ms
# on a LAN, about 5 round trips on a slower path).
# NAME PORT: one program under rock connects through that loss.
lost_fins() {
	local name=$1 port=$2 dropped from
	from=$(wc -l <"$t_tmp/rockd.log")
	for _ in 1 2; do
		nn_c iptables -w -I OUTPUT -p tcp --dport "$port" --tcp-flags FIN FIN \
			-m statistic --mode nth --every 1000000 --packet 0 -j DROP
	done
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$name.log" nn_c "$ROCK" "$IO" connect "$NN_S_ADDR" "$port" 3000 \
		>"$t_tmp/$name.out" 2>&1
	t_eq "$name: the program connected" "$(head -1 "$t_tmp/$name.out")" "blocking: ok"
	dropped=$(nn_c iptables -w -L OUTPUT -v -n -x | awk '/statistic/ { n += $1 } END { print n }')
	drop_rules
	t_eq "$name: two FINs of the probe were lost" "$dropped" 2
	t_eq "$name: rockd took the probe for a silent client" \
		"$(tail -n +$((from + 1)) "$t_tmp/rockd.log" | grep -c 'no byte in [0-9]* ms: a plain client')" 1
	t_check "$name: the client saw its end unheard and probed again" \
		grep -q 'probing again' "$t_tmp/$name.log"
	t_is_rock "$name" "$t_tmp/$name.log" 'probe\|plain\|relay' \
		"$t_tmp/$name.log" "$t_tmp/rockd.log"
}
lost_fins speaks-first 7301
lost_fins silent 7302

# Nothing lost: one probe, a rock, and rockd never waited out a probe.
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/clean.log" nn_c "$ROCK" "$IO" connect "$NN_S_ADDR" 7301 3000 >"$t_tmp/clean.out" 2>&1
t_check "no loss: a rock" grep -q ': a rock$' "$t_tmp/clean.log"
t_eq "no loss: no second probe" "$(grep -c 'probing again' "$t_tmp/clean.log")" 0
t_done
