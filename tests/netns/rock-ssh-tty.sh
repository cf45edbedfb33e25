#!/usr/bin/env bash
# rock-ssh-tty.sh: rock ssh as people sit at it: `rock ssh -t HOST` in tmux (the prompt comes, typing echoes), and `rock ssh -t -J JUMP DEST` (the connection to the jump host is the rock); both sessions carry on, keystrokes and answers, through a 20 s blackhole and a new client address. Runs on any path profile (NN_PROFILE).
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
sshd_up "PermitUserEnvironment yes"
# The destination behind the jump host: on the server's loopback only.
sshd_run inner 2222 "" "ListenAddress 127.0.0.1:2222"
sed -i '/^ListenAddress 0.0.0.0:2222$/d' "$t_tmp/inner_config"
ssh_rockd_in_path
nn_wait_port "$NN_S" 127.0.0.1 22 5 || t_skip_all "sshd did not start"
ssh_user_config
tmux_() { nn_c tmux -S "$t_tmp/tmux.sock" "$@"; }
# shellcheck disable=SC2317 # run by nn_cleanup
stop_tmux() { tmux_ kill-server 2>/dev/null; }
# NAME SSH-ARGS...: a tmux window running rock ssh -t, its log NAME.rock.log.
window() {
	local name=$1 cmd
	shift
	# As t_foreign: a sanitizer build's leak report is not ssh's status.
	cmd="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 ROCK_DEBUG=1 ROCK_LOG=$t_tmp/$name.rock.log ROCK_KNOWN_SERVERS=$t_tmp/known_servers $ROCK ssh -F $t_tmp/ssh_config -t $* 'PS1=\"$name\\$ \" exec bash --norc -i'"
	if [ "$name" = direct ]; then
		tmux_ new-session -d -s t -n "$name" -x 100 -y 30 "$cmd; echo ssh-exit-\$?; sleep 60"
	else
		tmux_ new-window -t t -n "$name" "$cmd; echo ssh-exit-\$?; sleep 60"
	fi
}
screen() { tmux_ capture-pane -p -t "t:$1"; }
shows() { screen "$1" | grep -qF -- "$2"; }

window direct "root@$NN_S_ADDR"
t_check "direct: the prompt appears" wait_for 15 shows direct 'direct$'
tmux_ send-keys -t t:direct 'echo typed'
t_check "direct: typing echoes (before Enter)" wait_for 5 shows direct 'direct$ echo typed'
tmux_ send-keys -t t:direct ' $((6 * 7))' Enter
t_check "direct: the command's answer" wait_for 5 shows direct 'typed 42'
t_check "direct: ssh's connection is a rock" grep -q ': a rock$' "$t_tmp/direct.rock.log"

window jump -J "root@$NN_S_ADDR" -p 2222 root@127.0.0.1
t_check "jump: the prompt appears" wait_for 15 shows jump 'jump$'
tmux_ send-keys -t t:jump 'echo via $((2 * 21))' Enter
t_check "jump: the command's answer" wait_for 5 shows jump 'via 42'
t_check "jump: the connection to the jump host is a rock" grep -q ': a rock$' "$t_tmp/jump.rock.log"
t_eq "one session rockd, on the jump host, for both" "$(wc -l <"$t_tmp/session.starts")" 1
t_eq "the session rockd relays both to the jump host's sshd (22), none to the destination's (2222)" \
	"$(nn_s ss -Htnp state established "( dport = :22 )" | grep -c '"rockd"') $(nn_s ss -Htnp state established "( dport = :2222 )" | grep -c '"rockd"')" "2 0"
t_eq "no plain connection to port 22 from the client" \
	"$(nn_c ss -Htn state established "( dport = :22 )" | wc -l)" 0

nn_log "blackhole, 20 s"
nn_blackhole both
for w in direct jump; do tmux_ send-keys -t "t:$w" "echo during-\$((1 + 1))" Enter; done
nap 20
nn_restore
nn_log "client address change"
nn_change_client_addr >/dev/null
for w in direct jump; do
	t_check "$w: what was typed in the blackhole is answered after it" wait_for 30 shows "$w" 'during-2'
	tmux_ send-keys -t "t:$w" "echo after-\$((3 + 4))" Enter
	t_check "$w: a command after the new address is answered" wait_for 15 shows "$w" 'after-7'
	t_check "$w: the rock reconnected" grep -q ': reconnected; resending' "$t_tmp/$w.rock.log"
done
tmux_ send-keys -t t:direct 'exit' Enter
t_check "direct: exit ends ssh, status 0" wait_for 20 shows direct 'ssh-exit-0' ||
	screen direct | tail -n 5 | sed 's/^/    /'
t_done
