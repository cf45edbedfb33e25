#!/usr/bin/env bash
# demo.sh: shows a newcomer what rocks does, on network namespaces of this machine.
# Usage: bash tools/demo.sh [PROFILE]   (a path profile of tests/netns/profiles.sh; wan)
# Exit status 0 when the stream under rock came through complete and in order.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
# The build tree (make) may be elsewhere than the sources.
build=${top_builddir:-$top}
export top_builddir=$build
. "$top/tests/netns/netns.sh"
ROCK="$build/tools/rock"
ROCKD="$build/daemon/rockd"
profile=${1:-wan}
case " $NN_PROFILES " in
*" $(nn_profile_base "$profile") "*) ;;
*) echo "demo: unknown path profile '$profile' (one of: $NN_PROFILES)"; exit 2 ;;
esac
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
last_line() { tail -n 1 "$1" 2>/dev/null; }

for b in "$ROCK" "$ROCKD"; do
	[ -x "$b" ] || { echo "demo: build first (make)"; exit 1; }
done
nn_require_root
out=$(mktemp -d)
# Kept when the demo fails, for its logs.
nn_on_cleanup "[ -e '$out/failed' ] || rm -rf '$out'"
nn_setup >/dev/null 2>&1 || { echo "demo: could not create network namespaces"; exit 1; }
nn_profile "$profile" >/dev/null 2>&1 || { echo "demo: could not put the path on profile $profile"; exit 1; }

say "1. A laptop ($NN_C_ADDR) and a server ($NN_S_ADDR), joined through a router."
echo "   (network namespaces on this machine; nothing outside them is touched)"
echo "   The path is \"$profile\": $(nn_profile_rtt_ms "$profile") ms round trips, netem options each way:"
opts=$(nn_profile_netem "$(nn_profile_base "$profile")")
echo "     ${opts:-(none: a bare virtual link)}"
# The service: numbered lines, five a second, forever.
nn_s socat TCP-LISTEN:9000,bind=127.0.0.1,reuseaddr,fork \
	SYSTEM:'i=0; while i=$((i+1)); do echo "line $i"; sleep 0.2; done' 2>/dev/null &
disown
nn_s "$ROCKD" -F --listen 7000 --backend 127.0.0.1:9000 2>"$out/rockd.log" &
disown
nn_wait_port "$NN_S" 0.0.0.0 7000 5 || nn_wait_port "$NN_S" "::" 7000 5
echo "   On the server, an unmodified service prints numbered lines; rockd fronts it:"
echo "     rockd --listen 7000 --backend 127.0.0.1:9000"

say "2. Two copies of the same unmodified program on the laptop read the stream:"
echo "     socat -u TCP:$NN_S_ADDR:7000 -         plain: rockd relays it untouched"
echo "     rock socat -u TCP:$NN_S_ADDR:7000 -    the same, under rock: its socket is a rock"
nn_c bash -c "socat -u TCP:$NN_S_ADDR:7000 - >'$out/plain' 2>'$out/plain.err'; echo \"exit \$?\" >>'$out/plain.err'" 2>/dev/null &
disown
nn_c bash -c "ROCK_DEBUG=1 ROCK_LOG='$out/rock.log' '$ROCK' socat -u TCP:$NN_S_ADDR:7000 - >'$out/rock' 2>'$out/rock.err'" 2>/dev/null &
disown
# Both streams flowing, and the rock made, before the first fault (a
# connect the resets catch is refused, as a plain one would be).
for _ in $(seq 150); do
	[ -s "$out/plain" ] && [ -s "$out/rock" ] &&
		grep -q ': a rock$' "$out/rock.log" 2>/dev/null && break
	sleep 0.1
done
sleep 1
echo "   plain socat is at:      $(last_line "$out/plain")"
echo "   socat under rock is at: $(last_line "$out/rock")"

say "3. A middlebox resets the connections (the router answers with TCP RSTs for 2 s)."
nn_rst_inject both
sleep 2
nn_restore
sleep 1
if grep -q 'Connection reset by peer' "$out/plain.err"; then
	echo "   plain socat: died with 'Connection reset by peer' at $(last_line "$out/plain")"
else
	echo "   plain socat: stuck at $(last_line "$out/plain"): the resets killed its connection"
	echo "                 at the server end, and it will wait for more lines forever"
fi
echo "   socat under rock: at $(last_line "$out/rock") and counting"

say "4. The laptop moves: the network is gone for 10 s, then it comes back with a new address."
nn_blackhole both
sleep 10
nn_change_client_addr >/dev/null
nn_restore
sleep 2
echo "   socat under rock: at $(last_line "$out/rock")"

say "5. Was anything lost or duplicated? The lines socat under rock printed must be 1, 2, 3, ... with no gap."
n=$(wc -l <"$out/rock")
if [ "$n" -gt 0 ] && awk '$2 != NR { bad = 1 } END { exit bad }' "$out/rock"; then
	echo "   yes: $n lines, every number once, in order, through a reset storm,"
	echo "   a 10 s outage and an address change."
	echo "   rockd opened $(grep -c 'client connected, backend' "$out/rockd.log") connection(s) to the service for socat under rock."
else
	echo "   NO: the stream has a gap or a duplicate (see $out)"
	: >"$out/failed"
	ok=1
fi
echo "   What socat's connection went through underneath (ROCK_DEBUG=1 ROCK_LOG=FILE):"
sed -n 's/^[0-9T:.-]*Z librock\[[0-9]*\]: [a-z]*: rock_session_set_state: rock [0-9a-f]*: /     /p' "$out/rock.log"
echo "   socat itself saw none of it: no error, no reconnect, one connection."

say "6. Also: rock --keepalive-only CMD is a drop-in for libdontdie:"
echo "   every TCP socket of CMD gets keepalive with ROCK_KEEPALIVE_TIME/INTVL/PROBES,"
echo "   so an idle connection to a dead peer fails in seconds instead of hours."
exit "${ok:-0}"
