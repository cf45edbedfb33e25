#!/usr/bin/env bash
# rock-ssh-fork.sh: ssh where a rock crosses fork and exec: `rock ssh -f -N -L` forwards a 52 MB download, a ControlPersist master carries a first, second and third session, and sshd itself run under rock (no rockd; it forks and re-executes per connection) serves a session, byte-exact through RSTs, a 15 s blackhole and a client address change; plain ssh under the same faults is the control, and a plain client of the rock sshd is served as before; sshd restarted (SIGTERM to the listener, a new one on the port) under a streaming session, which carries on in order through an RST after it.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
# shellcheck source=ssh-lib.sh
. "$here/ssh-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
ssh_require sha256sum
rock_netns_up
nn_on_cleanup stop_ssh
sshd_up
# sshd under rock, accepting rocks itself: no rockd in front of port 2222.
sshd_run rsshd 2222 "env ROCK_SERVE=1 ROCK_DEBUG=1 ROCK_LOG=$t_tmp/rsshd.rock.log \
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 $ROCK"
nn_s "$ROCKD" -F -v 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 22 5 && nn_wait_port "$NN_S" "$NN_S_ADDR" 4022 5 &&
	nn_wait_port "$NN_S" "$NN_S_ADDR" 2222 20 || t_fail_all "sshd or rockd did not start"

RATE=2000000 # bytes/s the forwarded source sends, for
SECS=26      # seconds: 52 MB, across every fault
# On a path profile with a rate limit, half of it.
mbit=$(nn_profile_netem "$(nn_profile_base "${NN_PROFILE:-lan}")" | sed -n 's/.*rate \([0-9]*\)mbit.*/\1/p')
[ -z "$mbit" ] || RATE=$((mbit * 1000000 / 16))
LINES=300    # a session's lines, one per 0.1 s
cm="$t_tmp/cm"
# shellcheck disable=SC2317 # run by nn_cleanup
stop_ssh() { pkill -f "ssh .*($t_tmp|-L 80[89]1:)" 2>/dev/null; }

rock_ssh() {
	local tag=$1
	shift
	ROCK_PORT_MAP=22=4022 ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$tag.rock.log" \
		t_foreign nn_c "$ROCK" ssh "${ssh_opts[@]}" "$@"
}
stream_cmd() { echo "i=1; while [ \$i -le $LINES ]; do echo \"$1 \$i\"; i=\$((i + 1)); sleep 0.1; done"; }
mux=(-o ControlMaster=auto -o "ControlPath=$cm" -o ControlPersist=yes)

# ---- the tunnels: rock ssh -f -N -L, and plain ssh -f -N -L as control ----
nn_s "$TRAFFIC" source 8080 "$RATE" "$SECS" "$t_tmp/sent.bin" &
pids+=($!)
nn_s "$TRAFFIC" source 8090 "$RATE" "$SECS" "$t_tmp/plain-sent.bin" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 8080 5 && nn_wait_port "$NN_S" 127.0.0.1 8090 5 ||
	t_skip_all "the sources did not start"
rock_ssh tunnel -f -N -L 8081:127.0.0.1:8080 "root@$NN_S_ADDR" 2>"$t_tmp/tunnel.err"
t_eq "rock ssh -f -N -L: went to the background (status)" "$?" 0
nn_c ssh "${ssh_opts[@]}" -f -N -L 8091:127.0.0.1:8090 "root@$NN_S_ADDR" 2>"$t_tmp/plain-tunnel.err"
nn_wait_port "$NN_C" 127.0.0.1 8081 5 && nn_wait_port "$NN_C" 127.0.0.1 8091 5 ||
	t_bad "the forwarded ports did not open"
nn_c "$TRAFFIC" sink 127.0.0.1 8081 "$t_tmp/got.bin" >"$t_tmp/sink.out" 2>&1 &
sink_pid=$!
pids+=("$sink_pid")
nn_c "$TRAFFIC" sink 127.0.0.1 8091 "$t_tmp/plain-got.bin" >"$t_tmp/plain-sink.out" 2>&1 &
plain_sink_pid=$!
pids+=("$plain_sink_pid")

# ---- the master, with the first session; the second through it ------------
rock_ssh master "${mux[@]}" "root@$NN_S_ADDR" "$(stream_cmd first)" >"$t_tmp/first.out" 2>&1 &
first_pid=$!
pids+=("$first_pid")
wait_for 10 test -S "$cm" || t_bad "the master's control socket did not appear"
rock_ssh second "${mux[@]}" "root@$NN_S_ADDR" "$(stream_cmd second)" >"$t_tmp/second.out" 2>&1 &
second_pid=$!
pids+=("$second_pid")
nn_c ssh "${ssh_opts[@]}" "root@$NN_S_ADDR" "$(stream_cmd plain)" >"$t_tmp/plain.out" 2>&1 &
plain_pid=$!
pids+=("$plain_pid")
# ---- a session of the sshd under rock: port 2222 is mapped nowhere -------
rock_ssh served -p 2222 "root@$NN_S_ADDR" "$(stream_cmd served)" >"$t_tmp/served.out" 2>&1 &
served_pid=$!
pids+=("$served_pid")
nap 3

# ---- the faults -----------------------------------------------------------
nn_log "RSTs, 2 s"
nn_rst_inject both
nap 2
nn_restore
nap 2
nn_log "blackhole, 15 s"
nn_blackhole both
nap 15
nn_restore
nap 2
nn_log "client address change"
nn_change_client_addr >/dev/null

# ---- the third session, through the master after the faults ---------------
head -c 4000000 /dev/urandom >"$t_tmp/third.in"
rock_ssh third "${mux[@]}" "root@$NN_S_ADDR" cat <"$t_tmp/third.in" >"$t_tmp/third.out" 2>"$t_tmp/third.err"
t_eq "third session through the master: status" "$?" 0
t_eq "third session: 4 MB echoed byte-exact (sha256)" \
	"$(sha256sum <"$t_tmp/third.out")" "$(sha256sum <"$t_tmp/third.in")"

for s in first second served; do
	eval "pid=\$${s}_pid"
	if wait_pid "$pid" 60; then rc=$waited; else rc=124; fi
	t_eq "$s session: ssh exit status" "$rc" 0
	t_eq "$s session: all $LINES lines, complete and in order" \
		"$(sha256sum <"$t_tmp/$s.out")" "$(seq 1 "$LINES" | sed "s/^/$s /" | sha256sum)"
done
if wait_pid "$sink_pid" 90; then rc=$waited; else rc=124; fi
t_eq "tunnel: the download ended (status)" "$rc" 0
t_eq "tunnel: $((RATE * SECS)) bytes forwarded" "$(size "$t_tmp/got.bin")" $((RATE * SECS))
t_eq "tunnel: byte-exact (sha256)" "$(sha256sum <"$t_tmp/got.bin")" "$(sha256sum <"$t_tmp/sent.bin")"

wait_pid "$plain_pid" 30
t_check "control: the plain session died ($(tail -n 1 "$t_tmp/plain.out"))" \
	test "$(grep -c '^plain ' "$t_tmp/plain.out")" -lt "$LINES"
wait_pid "$plain_sink_pid" 30
t_check "control: the plain tunnel lost the download ($(size "$t_tmp/plain-got.bin") bytes)" \
	test "$(size "$t_tmp/plain-got.bin")" -lt $((RATE * SECS))

out=$(nn_c ssh "${ssh_opts[@]}" -p 2222 "root@$NN_S_ADDR" echo plain-to-rock-sshd 2>&1)
t_eq "plain ssh to the sshd under rock: served as before" "$out" plain-to-rock-sshd
t_eq "sshd under rock: one rock accepted (the plain client's connection stayed plain)" \
	"$(grep -c 'an accepted rock' "$t_tmp/rsshd.rock.log")" 1
t_check "sshd under rock: its fork shared the rock with the connection's sshd" \
	grep -q "fork: 1 rocks shared with the child" "$t_tmp/rsshd.rock.log"
t_check "sshd under rock: the client's reconnects reached it (RSTs, blackhole, address)" \
	test "$(grep -c 'client reconnected' "$t_tmp/rsshd.rock.log")" -ge 2

# ---- sshd restarted under a live session ------------------------------------
# As `systemctl restart ssh` does (KillMode=process): the listening sshd gets
# SIGTERM and exits, its session's sshd lives on, a new sshd under rock
# (ROCK_SERVE unset) listens on the port. The old one's rock goes on in its
# keeper; a fault then makes the client reconnect: the new listener hands
# the request to the keeper (the port's rendezvous), and the session
# carries on, every line in order.
rock_ssh restarted -p 2222 "root@$NN_S_ADDR" "$(stream_cmd restarted)" \
	>"$t_tmp/restarted.out" 2>"$t_tmp/restarted.err" &
restarted_pid=$!
pids+=("$restarted_pid")
wait_for 20 grep -q '^restarted 20$' "$t_tmp/restarted.out" ||
	t_bad "restart: the session did not start"
old_sshd=$(cat "$t_tmp/rsshd.pid" 2>/dev/null)
start=$(now_ms)
kill -TERM "$old_sshd" 2>/dev/null
wait_for 10 sh -c "! kill -0 $old_sshd 2>/dev/null" || t_bad "restart: the old sshd did not exit"
gone=$(now_ms)
sshd_run rsshd2 2222 "env ROCK_DEBUG=1 ROCK_LOG=$t_tmp/rsshd2.rock.log \
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 $ROCK"
nn_wait_port "$NN_S" "$NN_S_ADDR" 2222 20 || t_bad "restart: the new sshd did not listen"
t_check "restart: rock ls lists the session's rock, held by the old sshd's keeper" \
	sh -c "'$ROCK' ls --json | grep -q '\"program\": \"keeper:sshd\", .*\"role\": \"server\"'"
nap 1
lines=$(wc -l <"$t_tmp/restarted.out")
nn_rst_inject both
rst=$(now_ms)
nap 1
nn_restore
wait_for 20 sh -c "[ \$(wc -l <'$t_tmp/restarted.out') -gt $((lines + 10)) ]" ||
	t_bad "restart: no line came after the RST"
echo "# restart: the old sshd exited $((gone - start)) ms after SIGTERM;" \
	"the session's lines flowed again $(($(now_ms) - rst)) ms after the RST (10 lines, 1 s of them)"
if wait_pid "$restarted_pid" 60; then rc=$waited; else rc=124; fi
t_eq "restart: the session's ssh exit status" "$rc" 0
t_eq "restart: all $LINES lines, complete and in order, across the restart and an RST" \
	"$(sha256sum <"$t_tmp/restarted.out")" "$(seq 1 "$LINES" | sed "s/^/restarted /" | sha256sum)"
t_check "restart: the new sshd handed the reconnect to the rock's holder" \
	grep -q 'a reconnect for a rock another process holds: handed to' "$t_tmp/rsshd2.rock.log"
t_check "restart: the old sshd's keeper took it" \
	grep -q 'a reconnect for a rock of ours, from the process now listening' "$t_tmp/rsshd.rock.log"
out=$(nn_c ssh "${ssh_opts[@]}" -p 2222 "root@$NN_S_ADDR" echo plain-to-new-sshd 2>&1)
t_eq "restart: a plain ssh to the new sshd" "$out" plain-to-new-sshd

# ---- the ends -------------------------------------------------------------
t_check "the master answers after everything" rock_ssh check "${mux[@]}" -O check "root@$NN_S_ADDR" 2>/dev/null
rock_ssh exit "${mux[@]}" -O exit "root@$NN_S_ADDR" 2>/dev/null
for tag in tunnel master; do
	t_check "$tag: its rock was relayed for ssh's fork" grep -q "fork: 1 rocks shared with the child" "$t_tmp/$tag.rock.log"
done
t_eq "no rock ended as a protocol violation" \
	"$(cat "$t_tmp"/*.rock.log | grep -c 'closed: peer acknowledged bytes never sent')" 0
echo "measured: reconnects: tunnel $(grep -c ': reconnected; resending' "$t_tmp/tunnel.rock.log")," \
	"master $(grep -c ': reconnected; resending' "$t_tmp/master.rock.log")"
t_done
