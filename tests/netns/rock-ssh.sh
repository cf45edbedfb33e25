#!/usr/bin/env bash
# rock-ssh.sh: `rock ssh` through a default rockd in front of sshd outlives a 30 s blackhole and an address change, streamed and interactive; plain ssh and ssh without rockd still work.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
# shellcheck source=ssh-lib.sh
. "$here/ssh-lib.sh"
[ -x "$ROCKD" ] || t_skip_all "rockd not built"
ssh_require tmux
rock_netns_up
nn_on_cleanup stop_tmux
sshd_up
# rockd with default settings: port 4022 in front of 127.0.0.1:22.
nn_s "$ROCKD" -F -v -p "$t_tmp/rockd.pid" 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 22 20 && nn_wait_port "$NN_S" "$NN_S_ADDR" 4022 20 ||
	t_fail_all "sshd or rockd did not start"

# LOGTAG SSH-ARGS...: ssh from the client namespace under rock, to the
# rockd on 4022: ROCK_PORT_MAP set, no rockd is started over ssh.
rock_ssh() {
	local tag=$1
	shift
	ROCK_PORT_MAP=22=4022 ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$tag.rock.log" \
		t_foreign nn_c "$ROCK" ssh "${ssh_opts[@]}" "$@"
}

# --- a minute of streamed output through a 30 s blackhole and a new address
lines=${ROCK_SSH_LINES:-600}
rock_ssh stream "root@$NN_S_ADDR" \
	"i=1; while [ \$i -le $lines ]; do echo \"line \$i\"; i=\$((i + 1)); sleep 0.1; done" \
	>"$t_tmp/stream.out" 2>"$t_tmp/stream.err" &
spid=$!
pids+=("$spid")
nap 10
t_check "stream: output is flowing" test -s "$t_tmp/stream.out"
nn_log "blackhole, 30 s, at line $(wc -l <"$t_tmp/stream.out")"
nn_blackhole both
nap 30
t_check "stream: ssh still running after 30 s of blackhole" kill -0 "$spid"
nn_restore
nap 5
nn_log "client address change, at line $(wc -l <"$t_tmp/stream.out")"
nn_change_client_addr >/dev/null
if wait_pid "$spid" 90; then
	t_eq "stream: ssh exit status" "$waited" 0
else
	t_bad "stream: ssh still running 90 s after the faults"
fi
expect=$(seq 1 "$lines" | sed 's/^/line /')
if [ "$(cat "$t_tmp/stream.out")" = "$expect" ]; then
	t_ok "stream: all $lines lines, complete and in order"
else
	t_bad "stream: output differs ($(wc -l <"$t_tmp/stream.out") lines)"
	diff <(echo "$expect") "$t_tmp/stream.out" | head -5 | sed 's/^/    /'
fi
[ ! -s "$t_tmp/stream.err" ] || sed 's/^/    ssh: /' "$t_tmp/stream.err"
t_check "stream: ssh's connection was a rock (via port 4022)" grep -q ': a rock$' "$t_tmp/stream.rock.log"
n=$(grep -c ': reconnected; resending' "$t_tmp/stream.rock.log")
if [ "$n" -ge 2 ]; then
	t_ok "stream: the rock reconnected $n times"
else
	t_bad "stream: the rock reconnected $n times, want 2 (blackhole, address)"
fi

# --- interactive, through tmux: type, blackhole 20 s, type, see the output
tmux_sock="$t_tmp/tmux.sock"
# shellcheck disable=SC2317 # run by nn_cleanup
stop_tmux() { tmux -S "$tmux_sock" kill-server 2>/dev/null; }
tmux -S "$tmux_sock" -f /dev/null new-session -d -x 120 -y 40 \
	"ASAN_OPTIONS='${ASAN_OPTIONS:-}:detect_leaks=0' ROCK_PORT_MAP=22=4022 ROCK_DEBUG=1 ROCK_LOG='$t_tmp/tmux.rock.log' ip netns exec '$NN_C' '$ROCK' ssh -tt ${ssh_opts[*]} root@$NN_S_ADDR; sleep 600"
screen() { tmux -S "$tmux_sock" capture-pane -p -t 0; }
# TEXT TIMEOUT_S: wait until the pane shows TEXT.
wait_screen() {
	local end
	end=$(($(now_ms) + $2 * 1000))
	until screen | grep -q -- "$1"; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.2
	done
}
type_line() { tmux -S "$tmux_sock" send-keys -t 0 "$1" Enter; }
if wait_screen '[#$] *$' 20; then
	type_line 'echo "first-$((6 * 7))"'
	t_check "interactive: typed before the outage, answered" wait_screen '^first-42' 10
	nn_blackhole both
	nap 2
	type_line 'echo "second-$((6 * 9))"'
	nap 18
	t_check "interactive: nothing answers during the blackhole" \
		sh -c "! tmux -S '$tmux_sock' capture-pane -p -t 0 | grep -q '^second-54'"
	nn_restore
	t_check "interactive: typed during the outage, answered after it" wait_screen '^second-54' 15
	type_line 'echo "third-$((6 * 11))"'
	t_check "interactive: typed after the outage, answered" wait_screen '^third-66' 10
	type_line 'exit'
else
	t_bad "interactive: no shell prompt"
	screen | tail -5 | sed 's/^/    /'
fi
t_check "interactive: the session was a rock" grep -q ': a rock$' "$t_tmp/tmux.rock.log"

# --- plain ssh to rockd's port: passed through to sshd
nn_c ssh "${ssh_opts[@]}" -p 4022 "root@$NN_S_ADDR" echo plain-through-rockd >"$t_tmp/plain.out" 2>&1
t_eq "plain ssh to port 4022: exit status" "$?" 0
t_eq "plain ssh to port 4022: output" "$(cat "$t_tmp/plain.out")" plain-through-rockd

# --- rock ssh to a host without rockd: plain ssh to port 22
rockd_pid=$(cat "$t_tmp/rockd.pid")
kill -KILL "$rockd_pid"
while kill -0 "$rockd_pid" 2>/dev/null; do sleep 0.05; done
rock_ssh norockd "root@$NN_S_ADDR" echo no-rockd-here >"$t_tmp/norockd.out" 2>&1
t_eq "rock ssh without rockd: exit status" "$?" 0
t_eq "rock ssh without rockd: output" "$(cat "$t_tmp/norockd.out")" no-rockd-here
t_check "rock ssh without rockd: plain TCP to port 22" \
	grep -q 'no rock (system error: Connection refused); plain TCP' "$t_tmp/norockd.rock.log"
# ssh's exit releases its rock to the engine: the last counts must hold
# (they were once checked against bytes only the engine had written).
t_eq "no rock ended as a protocol violation" \
	"$(cat "$t_tmp"/*.rock.log | grep -c 'closed: peer acknowledged bytes never sent')" 0
t_done
