#!/usr/bin/env bash
# demo.sh: shows a newcomer what rocks does, on two network namespaces of this machine.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/netns/netns.sh"
ROCK="$top/tools/rock"
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
stamp() { date +%s%N | cut -c1-13; }

[ -x "$ROCK" ] || { echo "demo: build first (make)"; exit 1; }
nn_require_root
out=$(mktemp -d)
nn_on_cleanup "rm -rf '$out'"
nn_setup >/dev/null 2>&1 || { echo "demo: could not create network namespaces"; exit 1; }

say "1. A laptop ($NN_C_ADDR) and a server ($NN_S_ADDR), joined through a router."
nn_s socat TCP-LISTEN:7000,reuseaddr,fork SYSTEM:'echo hello from the server; sleep 300' 2>/dev/null &
disown
nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 5
echo "   The server greets each client, then stays silent."

say "2. Two idle clients connect: plain socat, and socat under rock --keepalive-only."
echo "   \$ socat -u TCP:$NN_S_ADDR:7000 -"
echo "   \$ ROCK_KEEPALIVE_TIME=1 ROCK_KEEPALIVE_INTVL=1 ROCK_KEEPALIVE_PROBES=3 rock --keepalive-only socat -u TCP:$NN_S_ADDR:7000 -"
nn_c bash -c "socat -u TCP:$NN_S_ADDR:7000 - >'$out/plain' 2>&1; echo \"exit \$?\" >>'$out/plain'" 2>/dev/null &
disown
nn_c bash -c "ROCK_KEEPALIVE_TIME=1 ROCK_KEEPALIVE_INTVL=1 ROCK_KEEPALIVE_PROBES=3 '$ROCK' --keepalive-only socat -u TCP:$NN_S_ADDR:7000 - >'$out/rock' 2>&1; echo \"exit \$?\" >>'$out/rock'" 2>/dev/null &
disown
sleep 1.5
echo "   plain client got: $(head -1 "$out/plain")"
echo "   rock client got:  $(head -1 "$out/rock")"
echo "   The kernel shows keepalive timers only on the rock client's socket:"
nn_c ss -tno state established "dst $NN_S_ADDR" | sed 's/^/     /'

say "3. The network dies: the router now drops every packet (think: Wi-Fi gone, NAT reboot)."
nn_blackhole both
cut=$(stamp)
for _ in $(seq 100); do grep -q '^exit' "$out/rock" && break; sleep 0.1; done
now=$(stamp)
echo "   After $(( (now - cut) )) ms:"
if grep -q '^exit' "$out/rock"; then
	echo "   rock client:  $(grep -m1 ' E ' "$out/rock" | sed 's/^.* E //')"
	echo "                 -> it noticed the dead peer by itself (keepalive 1 s, then 3 probes"
	echo "                    1 s apart) and socat ended with $(grep '^exit' "$out/rock")"
else
	echo "   rock client:  still waiting (unexpected)"
fi
if grep -q '^exit' "$out/plain"; then
	echo "   plain client: exited too (unexpected)"
else
	echo "   plain client: still waiting, and would for over two hours (the kernel's default keepalive)"
fi

say "4. That is rock --keepalive-only: a drop-in for libdontdie (same DD_* variables)."
echo "   The full reliable-socket mode, where the session survives the outage instead,"
echo "   is being built (doc/PROTOCOL.md, rockd)."
