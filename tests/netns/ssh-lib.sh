# ssh-lib.sh: an sshd of the test's own in the server namespace (key authentication, root, everything under $t_tmp) for the rock ssh tests.
# shellcheck shell=bash

SSHD=$(command -v sshd || echo /usr/sbin/sshd)

# Skip unless ssh, ssh-keygen, sshd and the programs named are there.
ssh_require() {
	local t
	[ -x "$SSHD" ] || t_skip_all "sshd not installed (openssh-server)"
	for t in ssh ssh-keygen "$@"; do
		command -v "$t" >/dev/null || t_skip_all "$t not installed"
	done
}

# [SSHD_CONFIG_LINE...]: a host key, a client key ($t_tmp/id) authorized
# as root, and sshd on port 22 of the server namespace; its pid in pids.
sshd_up() {
	run_sshd_dir || t_skip_all "cannot make /run/sshd"
	ssh-keygen -q -t ed25519 -N '' -f "$t_tmp/host_key" || t_skip_all "ssh-keygen failed"
	ssh-keygen -q -t ed25519 -N '' -f "$t_tmp/id" || t_skip_all "ssh-keygen failed"
	cp "$t_tmp/id.pub" "$t_tmp/authorized_keys"
	chmod 700 "$t_tmp"
	sshd_run sshd 22 "" "$@"
	# shellcheck disable=SC2034 # used by the sourcing tests
	ssh_opts=(-F /dev/null -i "$t_tmp/id" -o BatchMode=yes -o StrictHostKeyChecking=no
		-o UserKnownHostsFile="$t_tmp/known_hosts" -o LogLevel=ERROR)
}

# NAME PORT WRAPPER [SSHD_CONFIG_LINE...]: one more sshd with sshd_up's
# keys, on PORT, run under WRAPPER (a command and its words, or ""):
# $t_tmp/NAME_config, NAME.log, NAME.pid.
sshd_run() {
	local name=$1 port=$2 line
	local -a wrap
	read -r -a wrap <<<"$3"
	shift 3
	cat >"$t_tmp/${name}_config" <<EOC
ListenAddress 0.0.0.0:$port
HostKey $t_tmp/host_key
AuthorizedKeysFile $t_tmp/authorized_keys
PidFile $t_tmp/$name.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel VERBOSE
EOC
	for line in "$@"; do echo "$line" >>"$t_tmp/${name}_config"; done
	nn_s "${wrap[@]}" "$SSHD" -D -e -f "$t_tmp/${name}_config" 2>"$t_tmp/$name.log" &
	pids+=($!)
}

# The build's rockd "installed" for the key's user on the server, as in
# PATH: each start a line of $t_tmp/session.starts, each one running a
# pid file in $t_tmp/sessions/ (other tests' run beside it) (after
# sshd_up with "PermitUserEnvironment yes").
ssh_rockd_in_path() {
	nn_on_cleanup ssh_stop_sessions
	mkdir -p "$t_tmp/bin" "$t_tmp/sessions"
	printf '#!/bin/sh\necho $$ >>"%s"\nexec "%s" -p "%s/$$.pid" "$@"\n' \
		"$t_tmp/session.starts" "$ROCKD" "$t_tmp/sessions" >"$t_tmp/bin/rockd"
	chmod 755 "$t_tmp/bin/rockd"
	echo "environment=\"PATH=$t_tmp/bin:/usr/bin:/bin\" $(cat "$t_tmp/id.pub")" >"$t_tmp/authorized_keys"
}

# [LINE...]: $t_tmp/ssh_config, a user's config as people write it (the
# test's key and known hosts, no prompts), then each LINE under Host *.
ssh_user_config() {
	local line
	{
		printf 'Host *\n    IdentityFile %s\n    BatchMode yes\n' "$t_tmp/id"
		printf '    StrictHostKeyChecking no\n    UserKnownHostsFile %s\n' "$t_tmp/known_hosts"
		printf '    LogLevel ERROR\n'
		for line in "$@"; do printf '    %s\n' "$line"; done
	} >"$t_tmp/ssh_config"
}

# The session rockds of this test that are running: their pids.
ssh_session_pids() {
	local f
	for f in "$t_tmp"/sessions/*.pid; do
		[ -e "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
	done
}
# shellcheck disable=SC2317 # run by nn_cleanup
# They stay ROCK_SSH_PERSIST s after their last session: not past the test.
ssh_stop_sessions() { ssh_session_pids | xargs -r kill 2>/dev/null; }
