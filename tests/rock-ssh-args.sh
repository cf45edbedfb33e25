#!/usr/bin/env bash
# rock-ssh-args.sh: `rock ssh`'s bootstrap against a fake ssh: the commands it runs, the settings it hands on, and each way of falling back to plain ssh.
set -u
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT

key=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
# shellcheck disable=SC2016 # the remote command, as rock sends it
remote='env PATH="$PATH:/usr/local/sbin:/usr/sbin" rockd --session --persist 300'
mkdir -p "$t_tmp/bin"
# The fake ssh: -G prints a port; -O check finds a master when
# FAKE_MASTER is set; the bootstrap (its last argument runs
# rockd) records its arguments and does what FAKE says; the real run
# records its arguments and the settings rock handed on.
cat >"$t_tmp/bin/ssh" <<'FAKE'
#!/bin/sh
for a; do last=$a; done
case " $* " in *" -G "*)
	# Without the destination h among its words: the jump host's.
	if [ -n "${FAKE_JUMP:-}" ] && ! printf '%s\n' "$@" | grep -qxE '(u@)?h'; then
		printf '%s|' "$@" >"$FAKE_DIR/jumpg.args"
		echo "user root"; echo "hostname j"; echo "port ${FAKE_JUMP_PORT:-22}"; exit 0
	fi
	echo "user root"; echo "hostname h"; echo "port ${FAKE_PORT:-22}"
	[ -n "${FAKE_NOCP:-}" ] || echo "controlpath /x/cm-h"
	[ -z "${FAKE_JUMP:-}" ] || echo "proxyjump $FAKE_JUMP"
	[ -z "${FAKE_PROXY:-}" ] || echo "proxycommand $FAKE_PROXY"
	exit 0 ;;
esac
case " $* " in *" -O check "*)
	printf '%s|' "$@" >"$FAKE_DIR/check.args"
	[ -n "${FAKE_MASTER:-}" ] && echo "Master running (pid=1)" >&2 && exit 0
	echo "Control socket connect(/x): No such file or directory" >&2; exit 255 ;;
esac
case $last in
*"rockd --session"*)
	printf '%s|' "$@" >"$FAKE_DIR/boot.args"
	case $FAKE in
	oldpersist)
		case $last in *--persist*) echo "rockd: unrecognized option '--persist'" >&2; exit 2 ;; esac
		echo "ROCKD-SESSION 1 40000 $FAKE_KEY" ;;
	ok) echo "ROCKD-SESSION 1 40000 $FAKE_KEY" ;;
	missing) echo "env: 'rockd': No such file or directory" >&2; exit 127 ;;
	noconnect) echo "ssh: connect to host h port 22: Connection refused" >&2; exit 255 ;;
	old) echo "rockd: unrecognized option '--session'" >&2; exit 2 ;;
	badkey) echo "ROCKD-SESSION 1 40000 ${FAKE_KEY#A}" ;;
	silent) ;;
	esac
	exit 0 ;;
esac
printf '%s|' "$@" >"$FAKE_DIR/run.args"
echo "map=${ROCK_PORT_MAP-unset} key=${ROCK_SERVER_KEY-unset}"
FAKE
chmod 755 "$t_tmp/bin/ssh"
export FAKE_DIR=$t_tmp FAKE_KEY=$key

# MODE ROCK-ARGS...: rock with the fake ssh first in PATH; stdout and
# stderr in $t_tmp/out and err, the status in $rc.
fake() {
	rm -f "$t_tmp/boot.args" "$t_tmp/run.args" "$t_tmp/check.args"
	FAKE=$1 PATH="$t_tmp/bin:$PATH" ROCK_MODE=rock t_foreign "$ROCK" "${@:2}" \
		>"$t_tmp/out" 2>"$t_tmp/err"
	rc=$?
}

FAKE_PORT=2222 fake ok ssh -p 2222 -i id -L 1:a:2 u@h -v echo 'a b'
t_eq "session: exit status" "$rc" 0
t_eq "session: the bootstrap's arguments (the user's options, to the host's options, no command)" \
	"$(cat "$t_tmp/boot.args")" "-T|-o|ClearAllForwardings=yes|-o|ControlMaster=no|-o|ControlPath=none|-o|RemoteCommand=none|-p|2222|-i|id|-L|1:a:2|u@h|-v|$remote|"
t_eq "session: a master looked for first, with the user's options" \
	"$(cat "$t_tmp/check.args")" "-O|check|-p|2222|-i|id|-L|1:a:2|u@h|-v|"
t_eq "session: ssh's own arguments unchanged" "$(cat "$t_tmp/run.args")" "-p|2222|-i|id|-L|1:a:2|u@h|-v|echo|a b|"
t_eq "session: ssh's port mapped to rockd's, pinned to its key" "$(cat "$t_tmp/out")" "map=2222=40000 key=$key"
t_eq "session: nothing said" "$(cat "$t_tmp/err")" ""

fake ok ssh -- h
t_eq "session after --: the bootstrap's arguments" "$(cat "$t_tmp/boot.args")" \
	"-T|-o|ClearAllForwardings=yes|-o|ControlMaster=no|-o|ControlPath=none|-o|RemoteCommand=none|--|h|$remote|"
t_eq "session after --: port 22 mapped" "$(cat "$t_tmp/out")" "map=22=40000 key=$key"

fake missing ssh h true
t_eq "not installed: exit status" "$rc" 0
t_eq "not installed: said once" "$(cat "$t_tmp/err")" "rock: rockd is not installed on h; the session is an ordinary ssh connection (TCP keepalive on), not protected"
t_eq "not installed: plain settings" "$(cat "$t_tmp/out")" "map=unset key=unset"

fake old ssh h
t_eq "rockd without --session: said why" "$(cat "$t_tmp/err")" \
	"rock: rockd on h did not start a session (exit status 2: rockd: unrecognized option '--session'); the session is an ordinary ssh connection (TCP keepalive on), not protected"
t_eq "rockd without --session: plain settings" "$(cat "$t_tmp/out")" "map=unset key=unset"

fake badkey ssh h
t_eq "a bad key: said, not used" "$(cat "$t_tmp/err")" \
	"rock: rockd on h answered \"ROCKD-SESSION 1 40000 ${key#A}\", not \"ROCKD-SESSION 1 PORT KEY\"; the session is an ordinary ssh connection (TCP keepalive on), not protected"
t_eq "a bad key: plain settings" "$(cat "$t_tmp/out")" "map=unset key=unset"

fake silent ssh h
t_eq "no answer, status 0: said" "$(cat "$t_tmp/err")" \
	"rock: rockd on h answered \"\", not \"ROCKD-SESSION 1 PORT KEY\"; the session is an ordinary ssh connection (TCP keepalive on), not protected"

# sshd may listen on loopback only, behind a rockd on 4022: ssh then runs
# as usual, and the default port map finds that rockd.
fake noconnect ssh h
t_eq "ssh cannot log in to start rockd: said, once" "$(cat "$t_tmp/err")" \
	"rock: cannot start rockd on h over ssh: ssh: connect to host h port 22: Connection refused; running ssh as usual"
t_eq "ssh cannot log in to start rockd: ssh runs as usual" "$rc $(cat "$t_tmp/out")" "0 map=unset key=unset"

# A live master (the user's ControlMaster): the session goes through it.
FAKE_MASTER=1 fake ok ssh -v h true
t_check "a master is running: no bootstrap" test ! -e "$t_tmp/boot.args"
t_eq "a master is running: ssh as typed, no port map" "$(cat "$t_tmp/out")" "map=unset key=unset"
t_eq "a master is running: said only under -v" "$(cat "$t_tmp/err")" ""
FAKE_MASTER=1 fake ok -v ssh h true
t_check "a master is running, rock -v: says so" \
	grep -q "^rock: an ssh master for h is running: the session goes through it" "$t_tmp/err"

# -J: ssh's own connection is to the jump host; the session rockd is
# started there, with the -F file the jump's ssh reads too.
FAKE_JUMP=u@j:2200 FAKE_JUMP_PORT=2200 fake ok ssh -F cfg -J u@j:2200 h true
t_eq "jump: the jump host resolved as ssh's ProxyJump dials it" "$(cat "$t_tmp/jumpg.args")" "-G|-F|cfg|-l|u|-p|2200|j|"
t_eq "jump: the bootstrap runs on the jump host" "$(cat "$t_tmp/boot.args")" \
	"-T|-o|ClearAllForwardings=yes|-o|ControlMaster=no|-o|ControlPath=none|-o|RemoteCommand=none|-F|cfg|-l|u|-p|2200|j|$remote|"
t_eq "jump: the jump host's port mapped, pinned" "$(cat "$t_tmp/out")" "map=2200=40000 key=$key"
t_eq "jump: ssh's own arguments unchanged" "$(cat "$t_tmp/run.args")" "-F|cfg|-J|u@j:2200|h|true|"
FAKE_JUMP=ssh://u@j:2200 FAKE_JUMP_PORT=2200 fake ok ssh -vF cfg -J ssh://u@j:2200 h true
t_eq "jump as a URI, -F in a cluster: the same words" "$(cat "$t_tmp/jumpg.args")" "-G|-F|cfg|-l|u|-p|2200|j|"
FAKE_JUMP="[2001:db8::1]:2200" FAKE_JUMP_PORT=2200 fake ok ssh -J "[2001:db8::1]:2200" h true
t_eq "jump by IPv6 address (ssh -G brackets it)" "$(cat "$t_tmp/jumpg.args")" "-G|-p|2200|2001:db8::1|"
FAKE_JUMP="u@[2001:db8::1" fake ok ssh h true
t_eq "jump host unreadable: said, ssh as usual" "$(cat "$t_tmp/err") $(cat "$t_tmp/out")" \
	"rock: cannot read the jump host \"u@[2001:db8::1\"; running ssh as usual map=unset key=unset"
FAKE_PROXY="nc %h %p" fake ok ssh h true
t_check "ProxyCommand: no bootstrap (ssh makes no connection of its own)" test ! -e "$t_tmp/boot.args"
t_eq "ProxyCommand: nothing said" "$rc $(cat "$t_tmp/err")" "0 "
ROCK_SSH_PERSIST=60 fake ok ssh h
t_check "ROCK_SSH_PERSIST=60: the session rockd stays 60 s" \
	grep -q -- "rockd --session --persist 60|$" "$t_tmp/boot.args"
ROCK_SSH_PERSIST=0 fake ok ssh h
t_check "ROCK_SSH_PERSIST=0: no --persist (a rockd from before it runs as ever)" \
	grep -q -- "rockd --session|$" "$t_tmp/boot.args"
fake oldpersist -v ssh h
t_check "a rockd without --persist: asked again without it" grep -q -- "rockd --session|$" "$t_tmp/boot.args"
t_eq "a rockd without --persist: pinned to it" "$(cat "$t_tmp/out")" "map=22=40000 key=$key"
t_check "a rockd without --persist: -v says so" grep -q "has no --persist; starting it without" "$t_tmp/err"
ROCK_SSH_PERSIST=soon fake ok ssh h
t_eq "ROCK_SSH_PERSIST=soon: reported once (by ssh's librock), the default kept" \
	"$(grep -c 'ROCK_SSH_PERSIST="soon" ignored.*accepted: seconds, 0 to 86400' "$t_tmp/err") $(grep -c -- "--persist 300|$" "$t_tmp/boot.args")" "1 1"

# scp (-S) and sftp run ssh with -s (the sftp subsystem); a user's -t
# asks for a terminal: the session's, not the bootstrap's. An option's
# argument with those letters stays as it is.
ln -s "$ROCK" "$t_tmp/bin/rock-ssh"
FAKE=ok PATH="$t_tmp/bin:$PATH" t_foreign "$t_tmp/bin/rock-ssh" -x -oForwardAgent=no -oPermitLocalCommand=no \
	-oClearAllForwardings=yes -oRemoteCommand=none -oRequestTTY=no -oControlMaster=no -s -- h sftp \
	>"$t_tmp/out" 2>"$t_tmp/err"
t_eq "scp's ssh (rock-ssh, -s): no -s in the bootstrap" "$(cat "$t_tmp/boot.args")" \
	"-T|-o|ClearAllForwardings=yes|-o|ControlMaster=no|-o|ControlPath=none|-o|RemoteCommand=none|-x|-oForwardAgent=no|-oPermitLocalCommand=no|-oClearAllForwardings=yes|-oRemoteCommand=none|-oRequestTTY=no|-oControlMaster=no|--|h|$remote|"
t_eq "scp's ssh: its own arguments unchanged, mapped and pinned" "$(cat "$t_tmp/run.args") $(cat "$t_tmp/out")" \
	"-x|-oForwardAgent=no|-oPermitLocalCommand=no|-oClearAllForwardings=yes|-oRemoteCommand=none|-oRequestTTY=no|-oControlMaster=no|-s|--|h|sftp| map=22=40000 key=$key"
fake ok ssh -tt -vts -i st h -t top
t_eq "-t and -s out of the bootstrap, option arguments kept" "$(cat "$t_tmp/boot.args")" \
	"-T|-o|ClearAllForwardings=yes|-o|ControlMaster=no|-o|ControlPath=none|-o|RemoteCommand=none|-v|-i|st|h|$remote|"
t_eq "-t and -s: ssh's own arguments unchanged" "$(cat "$t_tmp/run.args")" "-tt|-vts|-i|st|h|-t|top|"

FAKE_NOCP=1 FAKE_MASTER=1 fake ok ssh h true
t_check "no ControlPath: no master looked for" test ! -e "$t_tmp/check.args"
t_check "no ControlPath: the bootstrap" test -e "$t_tmp/boot.args"

ROCK_PORT_MAP=22=4022 fake ok ssh h
t_check "ROCK_PORT_MAP set: no bootstrap" test ! -e "$t_tmp/boot.args"
t_eq "ROCK_PORT_MAP set: the user's map" "$(cat "$t_tmp/out")" "map=22=4022 key=unset"
fake ok ssh -N h
t_check "ssh -N: no bootstrap" test ! -e "$t_tmp/boot.args"
fake ok --keepalive-only ssh h
t_check "--keepalive-only: no bootstrap" test ! -e "$t_tmp/boot.args"
t_done
