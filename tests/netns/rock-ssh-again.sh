#!/usr/bin/env bash
# rock-ssh-again.sh: `rock ssh` logs in once: the session rockd it starts is remembered (owner-only, in the runtime directory) and stays --persist seconds after its last session; the next rock ssh finds it with one probe, a gone or different rockd on that port means a new bootstrap, and a rockd the probe cache knows on the mapped port needs none. Nothing is said when all is well.
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
sshd_up "PermitUserEnvironment yes" "Subsystem sftp internal-sftp"
# The build's rockd "installed" for the user: each start counted.
ssh_rockd_in_path
nn_wait_port "$NN_S" 127.0.0.1 22 5 || t_skip_all "sshd did not start"
ssh_user_config
run="$t_tmp/run"
mkdir -m 700 "$run"
starts() { cat "$t_tmp/session.starts" 2>/dev/null | wc -l; }
# TAG [ENV=VALUE...] -- SSH-ARGS...: rock -v ssh from the client namespace;
# TAG.out, TAG.err (rock's -v lines and the library's debug log).
rock_ssh() {
	local tag=$1
	shift
	local -a envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	(
		export XDG_RUNTIME_DIR="$run" ROCK_KNOWN_SERVERS="$t_tmp/known_servers" "${envs[@]}"
		t_foreign nn_c "$ROCK" -v ssh -F "$t_tmp/ssh_config" "$@" \
			>"$t_tmp/$tag.out" 2>"$t_tmp/$tag.err"
	)
}
quiet() {
	XDG_RUNTIME_DIR="$run" ROCK_KNOWN_SERVERS="$t_tmp/known_servers" \
		t_foreign nn_c "$ROCK" ssh -F "$t_tmp/ssh_config" "$@"
}
host="root@$NN_S_ADDR"
memo="$run/rock/ssh/root@$NN_S_ADDR:22"
session_rockds() { ssh_session_pids | wc -l; }
no_session_rockd() { [ "$(session_rockds)" -eq 0 ]; }

rock_ssh first -- "$host" echo one
t_eq "first: output" "$(cat "$t_tmp/first.out")" one
t_eq "first: one session rockd started" "$(starts)" 1
t_check "first: remembered" test -f "$memo"
t_eq "first: the memo is the user's alone (file 600, directory 700)" \
	"$(stat -c %a "$memo") $(stat -c %a "$(dirname "$memo")")" "600 700"
port=$(awk '{ print $3 }' "$memo")
t_check "first: the memo names the port ssh went to" \
	grep -q "port $port for 22" "$t_tmp/first.err"
t_check "first: ssh's connection was a rock" grep -q ': a rock$' "$t_tmp/first.err"
one_session_rockd() { [ "$(session_rockds)" -eq 1 ]; }
t_check "first: the session rockd stays after its last session" wait_for 3 one_session_rockd

rock_ssh second -- "$host" echo two
t_eq "second: output" "$(cat "$t_tmp/second.out")" two
t_eq "second: no second login to start rockd" "$(starts)" 1
t_check "second: -v says it found the remembered rockd" \
	grep -q "session rockd on $NN_S_ADDR remembered and answering: port $port for 22" "$t_tmp/second.err"
t_check "second: a rock, pinned" grep -q ': a rock$' "$t_tmp/second.err"
t_check "second: one probe for rock ssh and ssh both (ssh's connect found it in the shared cache)" \
	grep -q 'a rockd, by the shared probe cache' "$t_tmp/second.err"
t_eq "all well: nothing said without -v" "$(quiet "$host" echo three 2>&1)" three
t_eq "all well: still one start" "$(starts)" 1

# Scripts: rock ssh as git's, rsync's and scp's transport (scp takes one
# program: rock-ssh, a link to rock). Each call finds the session rockd.
ln -s "$ROCK" "$t_tmp/bin/rock-ssh"
git init -q -b main "$t_tmp/work"
git -C "$t_tmp/work" -c user.name=t -c user.email=t@example.org commit -q --allow-empty -m one
git clone -q --bare "$t_tmp/work" "$t_tmp/repo.git"
transport() {
	XDG_RUNTIME_DIR="$run" ROCK_KNOWN_SERVERS="$t_tmp/known_servers" ROCK_DEBUG=1 \
		ROCK_LOG="$t_tmp/$1.rock.log" t_foreign nn_c "${@:2}"
}
head -c 100000 /dev/urandom >"$t_tmp/payload"
transport git env GIT_SSH_COMMAND="$ROCK ssh -F $t_tmp/ssh_config" \
	git ls-remote --symref "$host:$t_tmp/repo.git" >"$t_tmp/git.out" 2>"$t_tmp/git.err"
t_eq "git over rock ssh: the remote's HEAD" "$(head -n 1 "$t_tmp/git.out")" "$(printf 'ref: refs/heads/main\tHEAD')"
if command -v rsync >/dev/null; then
	transport rsync rsync -e "$ROCK ssh -F $t_tmp/ssh_config" "$t_tmp/payload" "$host:$t_tmp/payload.rsync" 2>"$t_tmp/rsync.err"
	t_check "rsync -e 'rock ssh': the file, byte for byte" cmp "$t_tmp/payload" "$t_tmp/payload.rsync"
else
	t_skipped "rsync not installed"
fi
transport scp scp -q -S "$t_tmp/bin/rock-ssh" -F "$t_tmp/ssh_config" "$t_tmp/payload" "$host:$t_tmp/payload.scp" 2>"$t_tmp/scp.err"
t_check "scp -S rock-ssh: the file, byte for byte" cmp "$t_tmp/payload" "$t_tmp/payload.scp"
for k in git rsync scp; do
	[ -e "$t_tmp/$k.rock.log" ] || continue
	t_check "$k: its ssh's connection was a rock" grep -q ': a rock$' "$t_tmp/$k.rock.log"
	t_eq "$k: nothing said" "$(cat "$t_tmp/$k.err")" ""
done
t_eq "scripts: no login to start rockd" "$(starts)" 1

# The remembered rockd is gone: one more login starts another.
ssh_stop_sessions
wait_for 5 no_session_rockd
rock_ssh gone -- "$host" echo four
t_eq "gone: output" "$(cat "$t_tmp/gone.out")" four
t_eq "gone: a new session rockd" "$(starts)" 2
t_check "gone: -v says why" grep -q "the session rockd remembered on port $port of $NN_S_ADDR is gone; starting another" "$t_tmp/gone.err"
port2=$(awk '{ print $3 }' "$memo")
t_check "gone: the new one remembered" test -n "$port2" -a "$port2" != "$port"

# Another rockd (another key) on the remembered port: not taken for ours.
ssh_stop_sessions
wait_for 5 no_session_rockd
nn_s "$ROCKD" -F -k "$t_tmp/other.key" --listen "$port2" --backend 127.0.0.1:22 2>"$t_tmp/other.log" &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" "$port2" 5
rock_ssh other -- "$host" echo five
t_eq "another rockd on the port: output" "$(cat "$t_tmp/other.out")" five
t_eq "another rockd on the port: a new session rockd, not the stranger" "$(starts)" 3
t_check "another rockd on the port: -v says the remembered one is gone" \
	grep -q "remembered on port $port2 of $NN_S_ADDR is gone" "$t_tmp/other.err"
t_eq "another rockd on the port: it saw no rock" "$(grep -c 'rock .* from' "$t_tmp/other.log")" 0
kill "${pids[-1]}" 2>/dev/null

# --persist: the session rockd leaves that long after its last session.
ssh_stop_sessions
wait_for 5 no_session_rockd
rock_ssh persist ROCK_SSH_PERSIST=2 -- "$host" echo six
t_eq "persist 2: output" "$(cat "$t_tmp/persist.out")" six
t_check "persist 2: started with --persist 2" grep -q "persist 2\b\|for 2 s after its last" "$t_tmp/persist.err"
t_eq "persist 2: still there just after" "$(session_rockds)" 1
t_check "persist 2: gone within 6 s" wait_for 6 no_session_rockd

# Three at once with nothing remembered: one login starts one rockd, the
# other two wait for it and find it.
rm -f "$memo"
n=$(starts)
many=()
for k in 1 2 3; do
	rock_ssh "many$k" -- "$host" echo "many $k" &
	many+=($!)
done
wait "${many[@]}"
t_eq "three at once: each its output" "$(cat "$t_tmp"/many[123].out | sort | tr '\n' ' ')" "many 1 many 2 many 3 "
t_eq "three at once: one session rockd started" "$(($(starts) - n))" 1

# What answers on the remembered port replays the rockd's announcement
# (anyone can read it) but cannot prove its key: ssh's connect is
# refused, never made elsewhere, and the memo goes with a warning, so the
# next rock ssh starts a rockd of its own instead of failing again.
port=$(awk '{ print $3 }' "$memo")
nn_c python3 - "$NN_S_ADDR" "$port" >"$t_tmp/announcement" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.shutdown(socket.SHUT_WR)
buf = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    buf += b
sys.stdout.buffer.write(buf)
PY
t_eq "replay: the announcement read" "$(wc -c <"$t_tmp/announcement")" 1024
ssh_stop_sessions
wait_for 5 no_session_rockd
nn_s python3 - "$port" "$t_tmp/announcement" <<'PY' &
import socket, sys
ann = open(sys.argv[2], "rb").read()
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1])))
l.listen(8)
l.settimeout(30)
try:
    while True:
        c, _ = l.accept()
        c.settimeout(5)
        try:
            first = c.recv(4096)
            if not first:
                c.sendall(ann)          # a probe: the replayed announcement
            else:
                c.sendall(b"\0" * 200)  # a hello: no key to prove it with
        except OSError:
            pass
        c.close()
except socket.timeout:
    pass
PY
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" "$port" 5
n=$(starts)
rock_ssh replayed -- "$host" echo eight
t_eq "replay: ssh fails (status 255), nothing printed by the command" "$? $(cat "$t_tmp/replayed.out")" "255 "
t_check "replay: the pinned key was not proved" grep -q "did not prove its key; .* removed" "$t_tmp/replayed.err"
t_check "replay: the memo is gone" test ! -e "$memo"
t_eq "replay: no login meanwhile" "$(starts)" "$n"
rock_ssh after -- "$host" echo nine
t_eq "after the replay: the next rock ssh starts its own rockd" "$(cat "$t_tmp/after.out") $(($(starts) - n))" "nine 1"
kill "${pids[-1]}" 2>/dev/null

# A system rockd on the mapped port (22=4022) that the probe cache knows.
rm -f "$memo"
nn_s "$ROCKD" -F -k "$t_tmp/system.key" --listen 4022 --backend 127.0.0.1:22 2>"$t_tmp/system.log" &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 4022 5
XDG_RUNTIME_DIR="$run" ROCK_KNOWN_SERVERS="$t_tmp/known_servers" \
	t_foreign nn_c "$ROCK" bash -c "exec 3<>/dev/tcp/$NN_S_ADDR/22" 2>/dev/null
n=$(starts)
t_check "system rockd: its key known (first use, by that connect)" grep -q "^$NN_S_ADDR:4022 " "$t_tmp/known_servers"
rock_ssh system -- "$host" echo seven
t_eq "system rockd: output" "$(cat "$t_tmp/system.out")" seven
t_eq "system rockd: no bootstrap" "$(starts)" "$n"
t_check "system rockd: -v says the probe cache knew it" \
	grep -q "a rockd on port 4022 of $NN_S_ADDR (probe cache), key $(awk -v d="$NN_S_ADDR:4022" '$1 == d { print $2 }' "$t_tmp/known_servers") (known servers): nothing to start" "$t_tmp/system.err"
t_check "system rockd: ssh's connection a rock to it" grep -q ': a rock$' "$t_tmp/system.err"
# Its key not known (another known servers file): never taken on first
# use from whatever listens on an unprivileged port; a bootstrap instead.
rm -f "$memo"
n=$(starts)
rock_ssh unknown ROCK_KNOWN_SERVERS="$t_tmp/other_known" -- "$host" echo ten
t_eq "system rockd, key unknown: a session rockd of our own" "$(cat "$t_tmp/unknown.out") $(($(starts) - n))" "ten 1"
t_done
