#!/usr/bin/env bash
# rock-ssh-config.sh: `rock ssh` with a real ~/.ssh/config (ControlMaster auto, ControlPersist, ControlPath with %C) and rockd in the server's PATH, no ROCK_PORT_MAP: the bootstrap is not the master, the master is a rock to the session rockd (no plain connection to port 22), a second session goes through it with no second bootstrap, and both carry on in order through a 12 s blackhole and a new client address.
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
nn_on_cleanup stop_ssh
sshd_up "PermitUserEnvironment yes"
# The build's rockd "installed" for the user: each start counted.
ssh_rockd_in_path
nn_wait_port "$NN_S" 127.0.0.1 22 5 || t_skip_all "sshd did not start"

# The user's config, as people write it.
ssh_user_config "ControlMaster auto" "ControlPath $t_tmp/cm-%C" "ControlPersist yes"
# shellcheck disable=SC2317 # run by nn_cleanup
stop_ssh() {
	nn_c ssh -F "$t_tmp/ssh_config" -O exit "root@$NN_S_ADDR" 2>/dev/null
	pkill -f "ssh -F $t_tmp/ssh_config" 2>/dev/null
}

# LOGTAG SSH-ARGS...: rock ssh from the client namespace as a user runs it.
rock_ssh() {
	local tag=$1
	shift
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$tag.rock.log" ROCK_KNOWN_SERVERS="$t_tmp/known_servers" \
		t_foreign nn_c "$ROCK" ssh -F "$t_tmp/ssh_config" "$@"
}
# TAG: a session printing numbered lines until the test says.
stream() {
	rock_ssh "$1" "root@$NN_S_ADDR" \
		"i=1; until [ -e $t_tmp/go ]; do echo \"$1 \$i\"; i=\$((i + 1)); sleep 0.1; done; echo \"end \$i\"" \
		>"$t_tmp/$1.out" 2>"$t_tmp/$1.err" &
	spid[$1]=$!
	pids+=("${spid[$1]}")
}
declare -A spid

stream first
t_check "first: output is flowing" wait_for 10 test -s "$t_tmp/first.out"
t_check "first: its ssh is the master (a control socket)" \
	wait_for 5 sh -c "ls $t_tmp/cm-* >/dev/null 2>&1"
t_eq "first: one session rockd started" "$(wc -l <"$t_tmp/session.starts")" 1
t_check "first: the master's connection is a rock" grep -q ': a rock$' "$t_tmp/first.rock.log"
t_eq "no plain connection to port 22 from the client (the bootstrap's is gone, none kept)" \
	"$(nn_c ss -Htn state established "( dport = :22 )" | wc -l)" 0

stream second
t_check "second: output is flowing" wait_for 10 test -s "$t_tmp/second.out"
t_eq "second: no second bootstrap (the master carries it)" "$(wc -l <"$t_tmp/session.starts")" 1
t_eq "second: no connection of its own" "$(cat "$t_tmp/second.rock.log" 2>/dev/null | grep -c ': a rock$')" 0

nn_log "blackhole, 12 s, at lines $(wc -l <"$t_tmp/first.out") and $(wc -l <"$t_tmp/second.out")"
nn_blackhole both
nap 12
nn_restore
t_check "the master reconnected after the blackhole" \
	wait_for 15 grep -q ': reconnected; resending' "$t_tmp/first.rock.log"
nn_log "client address change"
nn_change_client_addr >/dev/null
t_check "the master reconnected from the new address" \
	wait_for 15 sh -c "[ \$(grep -c ': reconnected; resending' '$t_tmp/first.rock.log') -ge 2 ]"
nap 2
touch "$t_tmp/go"
for tag in first second; do
	if wait_pid "${spid[$tag]}" 15; then
		t_eq "$tag: ssh exit status" "$waited" 0
	else
		t_bad "$tag: ssh still running 15 s after it was told to end"
	fi
	lines=$(($(tail -n 1 "$t_tmp/$tag.out" | sed -n 's/^end //p') - 1))
	expect=$(seq 1 "$lines" | sed "s/^/$tag /"; echo "end $((lines + 1))")
	if [ "$lines" -ge 120 ] && [ "$(cat "$t_tmp/$tag.out")" = "$expect" ]; then
		t_ok "$tag: all $lines lines and the end, complete and in order"
	else
		t_bad "$tag: output differs or is short ($(wc -l <"$t_tmp/$tag.out") lines, want 120 or more)"
		diff <(echo "$expect") "$t_tmp/$tag.out" | head -5 | sed 's/^/    /'
	fi
	t_eq "$tag: nothing on stderr" "$(cat "$t_tmp/$tag.err")" ""
done
t_check "the master answers after everything" \
	nn_c ssh -F "$t_tmp/ssh_config" -O check "root@$NN_S_ADDR" 2>/dev/null
t_done
