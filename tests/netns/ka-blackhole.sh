#!/usr/bin/env bash
# ka-blackhole.sh: with keepalive 1 s / 1 s / 3 probes, a blackholed idle connection fails with ETIMEDOUT in about 4 s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/netns.sh"
nn_require_root
nn_on_cleanup t_finish
nn_setup >/dev/null || t_skip_all "could not build the namespaces"
client="$top_builddir/tests/ka-idle-client"
port=7001

nn_s socat TCP-LISTEN:$port,reuseaddr,fork SYSTEM:'sleep 60' &
nn_wait_port "$NN_S" "$NN_S_ADDR" $port 5 || t_skip_all "server did not start"

# start NAME ENV...: an idle client under rock --keepalive-only (or plain for "plain").
start() {
	local name=$1
	shift
	if [ "$name" = plain ]; then
		nn_c env "$@" "$client" "$NN_S_ADDR" $port >"$t_tmp/$name.out" 2>&1 &
	else
		nn_c env "$@" "$ROCK" --keepalive-only "$client" "$NN_S_ADDR" $port \
			>"$t_tmp/$name.out" 2>&1 &
	fi
}

start rock ROCK_KEEPALIVE_TIME=1 ROCK_KEEPALIVE_INTVL=1 ROCK_KEEPALIVE_PROBES=3
start dd DD_TCP_KEEPALIVE_TIME=1 DD_TCP_KEEPALIVE_INTVL=1 DD_TCP_KEEPALIVE_PROBES=3
start plain
for name in rock dd plain; do
	for _ in $(seq 100); do grep -q connected "$t_tmp/$name.out" && break; sleep 0.05; done
	t_check "$name client connected" grep -q connected "$t_tmp/$name.out"
done
# Let the connections go idle past one keepalive round, so a healthy
# probe/answer exchange happens before the cut.
sleep 1.5
nn_blackhole both
cut_ms=$(( $(date +%s%N) / 1000000 ))
nn_log "path blackholed"

# ROCK_* and DD_* clients must fail with ETIMEDOUT after ~1 s idle + 3 x 1 s probes.
for name in rock dd; do
	for _ in $(seq 200); do grep -q '^read ' "$t_tmp/$name.out" && break; sleep 0.05; done
	line=$(grep '^read ' "$t_tmp/$name.out")
	t_eq "$name: read fails with ETIMEDOUT" "$(echo "$line" | sed 's/ at_ms=.*//')" "read ret=-1 errno=ETIMEDOUT"
	at=${line##*at_ms=}
	if [ -n "$at" ]; then
		elapsed=$((at - cut_ms))
		echo "measured: $name client detected the dead peer $elapsed ms after the blackhole"
		# 1 s idle (already partly spent) + 3 probes 1 s apart: about 4 s;
		# loose bounds because the machine is shared.
		if [ "$elapsed" -ge 2000 ] && [ "$elapsed" -le 7000 ]; then
			t_ok "$name: detected within about 4 s ($elapsed ms)"
		else
			t_bad "$name: detection took $elapsed ms, want about 4000"
		fi
	fi
done
# Control: without rock the same idle connection notices nothing.
t_eq "plain client still blocked" "$(grep -c '^read ' "$t_tmp/plain.out")" 0
t_done
