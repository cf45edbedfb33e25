#!/usr/bin/env bash
# rock-ssh-session.sh: `rock ssh` to an sshd with no rockd in front starts `rockd --session` over ssh, streams through a 20 s blackhole and an address change byte-exact, pinned to the announced key; without rockd it says so once and runs plain ssh.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
# shellcheck source=ssh-lib.sh
. "$here/ssh-lib.sh"
[ -x "$ROCKD" ] || t_skip_all "rockd not built"
ssh_require
rock_netns_up
# The key's options set the remote PATH: with rockd (id) or without (id2).
sshd_up "PermitUserEnvironment yes"
ssh-keygen -q -t ed25519 -N '' -f "$t_tmp/id2" || t_skip_all "ssh-keygen failed"
# The build's rockd "installed" for the user, its pid file where we see it.
mkdir -p "$t_tmp/bin"
printf '#!/bin/sh\nexec "%s" -p "%s" "$@"\n' "$ROCKD" "$t_tmp/session.pid" >"$t_tmp/bin/rockd"
chmod 755 "$t_tmp/bin/rockd"
{
	echo "environment=\"PATH=$t_tmp/bin:/usr/bin:/bin\" $(cat "$t_tmp/id.pub")"
	echo "environment=\"PATH=/usr/bin:/bin\" $(cat "$t_tmp/id2.pub")"
} >"$t_tmp/authorized_keys"
nn_wait_port "$NN_S" 127.0.0.1 22 5 || t_skip_all "sshd did not start"

# --- rockd --session alone: its line, detached, gone when nobody came
out=$(nn_s "$ROCKD" --session --idle-timeout 1 -p "$t_tmp/idle.pid")
t_eq "rockd --session: exit status of the starting process" "$?" 0
t_check "rockd --session: announces 'ROCKD-SESSION 1 PORT KEY' ($out)" \
	grep -Eqx 'ROCKD-SESSION 1 [0-9]{1,5} [A-Za-z0-9+/]{43}=' <<<"$out"
port=$(awk '{ print $3 }' <<<"$out")
t_check "rockd --session: listening on the announced port $port" \
	nn_wait_port "$NN_S" "$NN_S_ADDR" "$port" 2
idle_pid=$(cat "$t_tmp/idle.pid" 2>/dev/null)
t_check "rockd --session: detached and running (pid ${idle_pid:-none})" kill -0 "${idle_pid:-0}"
t_check "rockd --session: exited 1 s after no session came" \
	wait_for 3 sh -c "! kill -0 ${idle_pid:-0} 2>/dev/null"
t_check "rockd --session: pid file removed" test ! -e "$t_tmp/idle.pid"

# LOGTAG SSH-ARGS...: rock ssh from the client namespace, the way a user
# runs it (no ROCK_PORT_MAP), known servers the test's own.
rock_ssh() {
	local tag=$1
	shift
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$tag.rock.log" ROCK_KNOWN_SERVERS="$t_tmp/known_servers" \
		t_foreign nn_c "$ROCK" ssh "${ssh_opts[@]}" "$@"
}

# --- streamed output through a 20 s blackhole, then a new client address;
# the remote loop ends when the test says (the namespaces share files).
# ROCK_SSH_PERSIST=0: the session rockd exits with its last session (the
# default keeps it 300 s for the next rock ssh: rock-ssh-again.sh).
ROCK_SSH_PERSIST=0 rock_ssh stream "root@$NN_S_ADDR" \
	"i=1; until [ -e $t_tmp/go ]; do echo \"line \$i\"; i=\$((i + 1)); sleep 0.1; done; echo \"end \$i\"" \
	>"$t_tmp/stream.out" 2>"$t_tmp/stream.err" &
spid=$!
pids+=("$spid")
t_check "stream: output is flowing" wait_for 5 test -s "$t_tmp/stream.out"
session_pid=$(cat "$t_tmp/session.pid" 2>/dev/null)
t_check "stream: a session rockd runs (pid ${session_pid:-none})" kill -0 "${session_pid:-0}"
nn_log "blackhole, 20 s, at line $(wc -l <"$t_tmp/stream.out")"
nn_blackhole both
nap 20
t_check "stream: ssh still running after 20 s of blackhole" kill -0 "$spid"
nn_restore
t_check "stream: reconnected after the blackhole" \
	wait_for 10 grep -q ': reconnected; resending' "$t_tmp/stream.rock.log"
nn_log "client address change, at line $(wc -l <"$t_tmp/stream.out")"
nn_change_client_addr >/dev/null
t_check "stream: reconnected from the new address" \
	wait_for 10 sh -c "[ \$(grep -c ': reconnected; resending' '$t_tmp/stream.rock.log') -ge 2 ]"
touch "$t_tmp/go"
if wait_pid "$spid" 10; then
	t_eq "stream: ssh exit status" "$waited" 0
else
	t_bad "stream: ssh still running 10 s after it was told to end"
fi
lines=$(($(tail -n 1 "$t_tmp/stream.out" | sed -n 's/^end //p') - 1))
expect=$(seq 1 "$lines" | sed 's/^/line /'; echo "end $((lines + 1))")
if [ "$lines" -ge 150 ] && [ "$(cat "$t_tmp/stream.out")" = "$expect" ]; then
	t_ok "stream: all $lines lines and the end, complete and in order"
else
	t_bad "stream: output differs or is short ($(wc -l <"$t_tmp/stream.out") lines, want 150 or more: 20 s of them)"
	diff <(echo "$expect") "$t_tmp/stream.out" | head -5 | sed 's/^/    /'
fi
t_eq "stream: nothing on stderr" "$(cat "$t_tmp/stream.err")" ""
t_check "stream: ssh's connection was a rock" grep -q ': a rock$' "$t_tmp/stream.rock.log"
t_eq "stream: reconnects (blackhole, address)" \
	"$(grep -c ': reconnected; resending' "$t_tmp/stream.rock.log")" 2
t_check "stream: pinned to the announced key, nothing learnt on first use" \
	test ! -e "$t_tmp/known_servers"
t_check "stream: the session rockd exited with its last session" \
	wait_for 5 sh -c "! kill -0 ${session_pid:-0} 2>/dev/null"

# --- rockd not installed: said once, then plain ssh
if [ -x /usr/local/sbin/rockd ] || [ -x /usr/sbin/rockd ]; then
	t_skipped "rockd is installed in this host's sbin: 'not installed' cannot be shown"
else
	for i in "${!ssh_opts[@]}"; do
		[ "${ssh_opts[$i]}" != "$t_tmp/id" ] || ssh_opts[i]="$t_tmp/id2"
	done
	rock_ssh plain "root@$NN_S_ADDR" echo plain-ok >"$t_tmp/plain.out" 2>"$t_tmp/plain.err"
	t_eq "no rockd: exit status" "$?" 0
	t_eq "no rockd: output" "$(cat "$t_tmp/plain.out")" plain-ok
	t_eq "no rockd: said once" "$(cat "$t_tmp/plain.err")" \
		"rock: rockd is not installed on $NN_S_ADDR; the session is an ordinary ssh connection (TCP keepalive on), not protected"
	t_check "no rockd: plain TCP to port 22" \
		grep -q 'no rock (system error: Connection refused); plain TCP' "$t_tmp/plain.rock.log"
fi
t_done
