#!/usr/bin/env bash
# wan-matrix.sh: on every path profile at once, through rockd: a fault-free minute of mixed traffic with no suspension, a 20 s blackhole and an address change byte-exact, idle detection, UDP blocked with a receiver that does not read; prints the figures.
# shellcheck source-path=SCRIPTDIR
#
# Two lanes per profile, each a process of this script in its own
# namespaces, all in parallel: "faults" (the fault-free minute, the
# blackhole, the new address, idle detection) and, per base profile,
# "udp" (UDP blocked, a receiver that does not read for 30 s). This
# process prints their results in order. WAN_MATRIX_PROFILES picks
# profiles (default: all, and wan+udp-blocked).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
PROFILES=${WAN_MATRIX_PROFILES:-"lan dsl wan cellular satellite wan+udp-blocked"}

# ---- the parent: start the lanes, wait, report ----------------------------
if [ "${1:-}" != --lane ]; then
	[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
	[ -x "$SSHD" ] || t_skip_all "sshd not installed (openssh-server)"
	for t in ssh ssh-keygen tmux sha256sum; do
		command -v "$t" >/dev/null || t_skip_all "$t not installed"
	done
	nn_require_root
	lanes=()
	for p in $PROFILES; do
		lanes+=("faults:$p")
		case $p in *udp-blocked) ;; *) lanes+=("udp:$p") ;; esac
	done
	lane_pids=()
	# shellcheck disable=SC2317 # run on the way out
	stop_lanes() { local p; for p in "${lane_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait; }
	trap 'stop_lanes; exit 143' TERM
	trap 'stop_lanes; exit 130' INT
	start=$(now_ms)
	for l in "${lanes[@]}"; do
		bash "$0" --lane "${l%%:*}" "${l#*:}" >"$t_tmp/$l" 2>"$t_tmp/$l.err" &
		lane_pids+=($!)
	done
	lane_rc=()
	for p in "${lane_pids[@]}"; do
		wait "$p"
		lane_rc+=($?)
	done
	# The failures first: a log cut short still names them.
	i=0
	for l in "${lanes[@]}"; do
		rc=${lane_rc[$i]}
		grep '^FAIL: ' "$t_tmp/$l" | sed "s/^/== $l: /"
		if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
			t_bad "$l: the lane failed (exit $rc)"
			tail -5 "$t_tmp/$l.err" | sed 's/^/    /'
		fi
		i=$((i + 1))
	done
	echo "== the matrix: suspensions in the fault-free minute (client/rockd), ms from"
	echo "   blackhole to an idle rock suspended (target 3 s + 2 RTT), from restore and"
	echo "   from the new address to data flowing (target 1 RTT + 300 ms), reconnects"
	echo "   with UDP blocked and the receiver not reading for 30 s (at most 1)"
	printf '%-16s %5s %11s %8s %9s %9s %9s\n' profile rtt suspensions detect restore new-addr udp
	for p in $PROFILES; do
		row=$(sed -n 's/^row: //p' "$t_tmp/faults:$p")
		udp=$(sed -n 's/^udp-row: //p' "$t_tmp/udp:$(nn_profile_base "${p%+udp-blocked}")" 2>/dev/null)
		[ -n "$row" ] || row="$(printf '%-16s' "$p") (no figures)"
		echo "$row ${udp:--}"
	done
	for l in "${lanes[@]}"; do
		echo "== $l"
		cat "$t_tmp/$l"
		t_pass=$((t_pass + $(grep -c '^PASS: ' "$t_tmp/$l")))
		t_fail=$((t_fail + $(grep -c '^FAIL: ' "$t_tmp/$l")))
	done
	echo "matrix wall time: $((($(now_ms) - start) / 1000)) s"
	t_done
fi

# ---- a lane ---------------------------------------------------------------
KIND=$2 P=$3
export NN_PROFILE=$P
rtt=$(nn_profile_rtt_ms "$P")
rock_netns_up
lane_start=$(now_ms)
# The server accepts Fast Open (a reconnect's request rides in the SYN), as
# rockd(8) recommends.
nn_s sysctl -qw net.ipv4.tcp_fastopen=3

# NAME CMD...: CMD under rock in the client namespace, its log in NAME.log.
rock_run() {
	local name=$1
	shift
	ROCK_DEBUG=1 ROCK_LOG="$t_tmp/$name.log" t_foreign nn_c "$ROCK" "$@"
}
# PORT: a listener in the server namespace (5 s).
wait_backend() { nn_wait_port "$NN_S" 127.0.0.1 "$1" 5 || t_skip_all "backend $1 did not start"; }

# ---- udp: UDP blocked, a receiver that does not read for 30 s
if [ "$KIND" = udp ]; then
	push_bytes=$((4 * 1048576))
	nn_udp_block
	nn_s socat -t 600 TCP4-LISTEN:9003,bind=127.0.0.1,reuseaddr \
		SYSTEM:"sleep 30; cat > '$t_tmp/push.got'" 2>/dev/null &
	pids+=($!)
	nn_s "$ROCKD" -F -v --listen 7003 --backend 127.0.0.1:9003 2>"$t_tmp/rockd.log" &
	pids+=($!)
	wait_backend 9003
	nn_wait_port "$NN_S" "$NN_S_ADDR" 7003 20 || t_fail_all "rockd did not start"
	rock_run push "$TRAFFIC" push "$NN_S_ADDR" 7003 "$push_bytes" >"$t_tmp/push.out" 2>&1 &
	push_pid=$!
	pids+=($!)
	if wait_pid "$push_pid" $((120 + rtt / 10)); then
		t_eq "$P+udp-blocked: push exit status" "$waited" 0
	else
		t_bad "$P+udp-blocked: the push did not finish"
	fi
	[ ! -s "$t_tmp/push.out" ] || sed 's/^/    /' "$t_tmp/push.out"
	t_check "$P+udp-blocked: the push was a rock" grep -q ': a rock$' "$t_tmp/push.log"
	reconn=$(grep -c 'CONNECTED -> SUSPENDED' "$t_tmp/push.log")
	echo "measured: $P+udp-blocked: receiver not reading 30 s: $reconn reconnect(s) in $((($(now_ms) - lane_start) / 1000)) s"
	if [ "$reconn" -le 1 ]; then
		t_ok "$P+udp-blocked, receiver not reading 30 s: $reconn reconnect(s)"
	else
		t_bad "$P+udp-blocked, receiver not reading 30 s: $reconn reconnects"
	fi
	grep 'CONNECTED -> SUSPENDED (' "$t_tmp/push.log" | sed 's/.*SUSPENDED (/    suspended (/'
	if [ "$("$TRAFFIC" pattern "$push_bytes" | sha256sum)" = "$(sha256sum <"$t_tmp/push.got" 2>/dev/null)" ]; then
		t_ok "$P+udp-blocked: $push_bytes bytes exact"
	else
		t_bad "$P+udp-blocked: the receiver got $(stat -c %s "$t_tmp/push.got" 2>/dev/null || echo 0) of $push_bytes bytes, or others"
	fi
	echo "udp-row: $reconn"
	t_done
fi

# ---- faults: the fault-free minute, the blackhole, the new address
nn_on_cleanup stop_tmux
# Paced stream rate (bytes/s): about a third of what TCP gets on the path.
case $(nn_profile_base "$P") in
cellular) rate=24000 ;;
satellite) rate=100000 ;;
*) rate=200000 ;;
esac
burst=65536

# The server: sshd, the backends, one rockd in front of all.
run_sshd_dir || t_skip_all "cannot make /run/sshd"
ssh-keygen -q -t ed25519 -N '' -f "$t_tmp/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$t_tmp/id" ||
	t_skip_all "ssh-keygen failed"
cp "$t_tmp/id.pub" "$t_tmp/authorized_keys"
chmod 700 "$t_tmp"
printf '%s\n' "ListenAddress 127.0.0.1:22" "HostKey $t_tmp/host_key" \
	"AuthorizedKeysFile $t_tmp/authorized_keys" "PidFile $t_tmp/sshd.pid" \
	"PermitRootLogin prohibit-password" "PasswordAuthentication no" \
	"KbdInteractiveAuthentication no" "UsePAM no" "StrictModes no" >"$t_tmp/sshd_config"
nn_s "$SSHD" -D -e -f "$t_tmp/sshd_config" 2>"$t_tmp/sshd.log" &
pids+=($!)
nn_s "$TRAFFIC" source 9000 "$rate" 600 "$t_tmp/stream.sent" 2>"$t_tmp/source.err" &
pids+=($!)
for port in 9001 9002; do
	nn_s socat -t 600 "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" EXEC:cat 2>/dev/null &
	pids+=($!)
done
nn_s "$ROCKD" -F -v --listen 7000 --backend 127.0.0.1:9000 --listen 7001 --backend 127.0.0.1:9001 \
	--listen 7002 --backend 127.0.0.1:9002 --listen 4022 --backend 127.0.0.1:22 2>"$t_tmp/rockd.log" &
pids+=($!)
for port in 22 9000 9001 9002; do wait_backend "$port"; done
nn_wait_port "$NN_S" "$NN_S_ADDR" 4022 20 || t_fail_all "rockd did not start"

# The client: a paced stream, bursts on demand, an idle rock, rock ssh.
mkfifo "$t_tmp/bursts.in" "$t_tmp/idle.in"
exec {bursts_fd}<>"$t_tmp/bursts.in" {idle_fd}<>"$t_tmp/idle.in"
rock_run sink "$TRAFFIC" sink "$NN_S_ADDR" 7000 "$t_tmp/stream.got" >"$t_tmp/sink.out" 2>"$t_tmp/sink.err" &
sink_pid=$! pids+=($!)
rock_run bursts "$TRAFFIC" bursts "$NN_S_ADDR" 7001 "$burst" <"$t_tmp/bursts.in" >"$t_tmp/bursts.out" 2>&1 &
pids+=($!)
rock_run idle "$TRAFFIC" bursts "$NN_S_ADDR" 7002 1000 <"$t_tmp/idle.in" >"$t_tmp/idle.out" 2>&1 &
pids+=($!)
tmux_sock="$t_tmp/tmux.sock"
# shellcheck disable=SC2317 # run by nn_cleanup
stop_tmux() { tmux -S "$tmux_sock" kill-server 2>/dev/null; }
ssh_opts="-F /dev/null -i $t_tmp/id -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=$t_tmp/known_hosts -o LogLevel=ERROR"
tmux -S "$tmux_sock" -f /dev/null new-session -d -x 120 -y 40 \
	"ASAN_OPTIONS='${ASAN_OPTIONS:-}:detect_leaks=0' ROCK_DEBUG=1 ROCK_LOG='$t_tmp/ssh.log' ip netns exec '$NN_C' '$ROCK' ssh -tt $ssh_opts root@$NN_S_ADDR; sleep 600"
# shellcheck disable=SC2317 # called through wait_for
screen() { tmux -S "$tmux_sock" capture-pane -p -t 0 -S -200; }
# TEXT TIMEOUT_S: wait until the pane shows TEXT at the start of a line.
wait_screen() { wait_for "$2" on_screen "$1"; }
# shellcheck disable=SC2317 # called through wait_for
on_screen() { screen | grep -q -- "^$1"; }
keys=0 keys_ok=0
# One line typed: an answer only the remote shell can compute.
keystroke() {
	keys=$((keys + 1))
	tmux -S "$tmux_sock" send-keys -t 0 "echo k$keys-\$(($keys * 7))" Enter
	if wait_screen "k$keys-$((keys * 7))" $((10 + rtt / 100)); then
		keys_ok=$((keys_ok + 1))
	else
		t_bad "$P: typed line $keys not answered"
	fi
}
# FD: one burst on that client.
burst_now() { echo go >&"$1"; }
# FILE N TIMEOUT_S: wait until FILE reports N bursts echoed.
wait_bursts() { wait_for "$3" bursts_reached "$1" "$2"; }
# shellcheck disable=SC2317 # called through wait_for
bursts_reached() { [ "$(bursts_done "$1")" -ge "$2" ]; }
bursts_done() { grep -c '^burst [0-9]* ok' "$1"; }
# The bursts' round trips so far, in ms.
burst_times() { awk '$1 == "burst" && $3 == "ok" { printf "%s%s", s, $4; s = " " }' "$t_tmp/bursts.out"; }
got() { stat -c %s "$t_tmp/stream.got" 2>/dev/null || echo 0; }
sent() { stat -c %s "$t_tmp/stream.sent" 2>/dev/null || echo 0; }
# BYTES TIMEOUT_S: wait until the stream has brought BYTES.
wait_got() { wait_for "$2" got_reached "$1"; }
# shellcheck disable=SC2317 # called through wait_for
got_reached() { [ "$(got)" -ge "$1" ]; }
# TIMEOUT_S: wait until the stream has caught up with its source.
wait_caught_up() { wait_for "$1" caught_up; }
# shellcheck disable=SC2317 # called through wait_for
caught_up() { [ "$(got)" -ge $(($(sent) - rate)) ]; }
# AFTER_MS: ms from AFTER_MS until the stream flowed again: the end of the
# sink's pause (100 ms or more) around AFTER_MS; "<100" when it did not
# pause that long.
flowing_after() {
	awk -v t="$1" '$1 == "gap" && $2 <= t && $3 > t { print $3 - t; f = 1; exit }
		END { if (!f) print "<100" }' "$t_tmp/sink.out"
}
logs="$t_tmp/sink.log $t_tmp/bursts.log $t_tmp/idle.log $t_tmp/ssh.log"

# ---- A. a fault-free minute: bursts after idle gaps of 12-30 s, the
# paced stream, a typed line every 5 s
wait_screen '.*[#$] *$' $((20 + rtt / 50)) || t_bad "$P: no shell prompt through rock ssh"
# A lossy path must not make a plain connection of any of them. A first
# connect is a probe and a handshake: a lost SYN or answer costs a second
# or more (TCP's initial RTO), so wait for each to decide.
for r in sink bursts idle ssh; do
	wait_for 20 grep -q ': a rock$\|: no rock' "$t_tmp/$r.log"
	t_check "$P: the $r connection is a rock" grep -q ': a rock$' "$t_tmp/$r.log"
done
burst_now "$idle_fd"
gaps=(12 20 25)
t_a=$(now_ms)
burst_now "$bursts_fd"
n_bursts=1 next_burst=$((t_a + gaps[0] * 1000)) g=0
while [ $(($(now_ms) - t_a)) -lt 60000 ]; do
	keystroke
	if [ "$(now_ms)" -ge "$next_burst" ] && [ "$g" -lt ${#gaps[@]} ]; then
		burst_now "$bursts_fd"
		n_bursts=$((n_bursts + 1)) g=$((g + 1))
		next_burst=$((next_burst + ${gaps[g]:-99} * 1000))
	fi
	nap 5
done
wait_bursts "$t_tmp/bursts.out" "$n_bursts" $((10 + rtt / 50))
a_secs=$((($(now_ms) - t_a) / 1000))
# shellcheck disable=SC2086 # the log list
susp_a=$(cat $logs 2>/dev/null | grep -c 'CONNECTED -> SUSPENDED')
susp_d=$(grep -c ': CONNECTED -> SUSPENDED$' "$t_tmp/rockd.log")
t_eq "$P: fault-free ${a_secs} s of mixed traffic: no rock suspended (client)" "$susp_a" 0
t_eq "$P: fault-free: no rock suspended (rockd)" "$susp_d" 0
t_eq "$P: fault-free: every typed line answered" "$keys_ok" "$keys"
t_eq "$P: fault-free: bursts after idle gaps of 12-25 s echoed exactly" \
	"$(bursts_done "$t_tmp/bursts.out")" "$n_bursts"
echo "measured: $P: fault-free: bursts echoed in $(burst_times) ms"
# shellcheck disable=SC2086
[ "$susp_a" = 0 ] || grep -h 'CONNECTED -> SUSPENDED (' $logs | sed 's/^/    /'
got_a=$(got)

# ---- B. a 20 s blackhole, then a new client address
nn_blackhole both
fault=$NN_V4_MS
nap 20
had=$(got)
nn_restore
restore=$NN_V4_MS
wait_got $((had + 1)) 30 || t_bad "$P: the stream did not flow again after the blackhole"
wait_caught_up $((30 + 20 * rate / 10000)) || t_bad "$P: the stream did not catch up after the blackhole"
moved=$(now_ms)
had=$(got)
nn_change_client_addr >/dev/null
wait_got $((had + rate / 2)) 30 || t_bad "$P: the stream did not flow again after the address change"
burst_now "$bursts_fd"
burst_now "$idle_fd"
n_bursts=$((n_bursts + 1))
keystroke
wait_bursts "$t_tmp/idle.out" 2 $((10 + rtt / 50))
wait_bursts "$t_tmp/bursts.out" "$n_bursts" $((10 + rtt / 50))
touch "$t_tmp/stream.sent.stop"

det=$(rockd_ms "$t_tmp/idle.log" "$fault" 'CONNECTED -> SUSPENDED')
det=${det:+$((det - fault))}
back_addr=$(flowing_after "$moved")
# Data flowing again: the stream's first bytes after the restore, and the
# other rocks (each its own process, so its own scout) back in place.
backs=("$(flowing_after "$restore")")
for r in bursts idle ssh; do
	ms=$(rockd_ms "$t_tmp/$r.log" "$restore" 'SUSPENDED -> CONNECTED')
	backs+=("${ms:+$((ms - restore))}")
done
back=$(median "${backs[@]/#</}")
bound=$((3000 + 2 * rtt))
echo "measured: $P: idle rock suspended ${det:-never} ms after the blackhole (target $bound)"
echo "measured: $P: after the restore, the stream flowing in ${backs[0]} ms, the other rocks back in ${backs[*]:1} ms: median $back ms (target $((rtt + 300)))"
echo "measured: $P: after the address change, the stream flowing in $back_addr ms"
if [ -n "$det" ] && [ "$det" -le $((bound + 1000)) ]; then
	t_ok "$P: idle rock on a dead path suspended in $det ms"
else
	t_bad "$P: idle rock suspended after ${det:-never} ms, want about $bound"
fi
if [ -n "$back" ] && [ "$back" -le $((2 * rtt + 1500)) ]; then
	t_ok "$P: data flowing again $back ms (median) after the restore"
else
	t_bad "$P: data flowing again only ${back:-never} ms (median) after the restore"
fi
echo "measured: $P: every burst echoed in $(burst_times) ms"
t_eq "$P: every burst echoed exactly, after the faults too" "$(bursts_done "$t_tmp/bursts.out")" "$n_bursts"
t_eq "$P: the idle rock answers after the faults" "$(bursts_done "$t_tmp/idle.out")" 2

# The stream's end: every byte, in order, through the faults.
if wait_pid "$sink_pid" $((30 + rtt / 20)); then
	t_eq "$P: stream sink exit status" "$waited" 0
	if cmp -s "$t_tmp/stream.sent" "$t_tmp/stream.got"; then
		t_ok "$P: stream of $(got) bytes exact through the faults (sha256 $(sha256sum <"$t_tmp/stream.got" | cut -c1-16))"
	else
		t_bad "$P: stream differs: $(cmp "$t_tmp/stream.sent" "$t_tmp/stream.got" 2>&1 | head -1)"
	fi
else
	t_bad "$P: the stream did not end ($(got) of $(sent) bytes)"
fi
# shellcheck disable=SC2086
n_susp=$(cat $logs | grep -c 'CONNECTED -> SUSPENDED')
echo "measured: $P: $n_susp suspension(s) in all after the faults (4 rocks, 2 faults)"
printf 'row: %-16s %5s %11s %8s %9s %9s\n' "$P" "$rtt" "$susp_a/$susp_d" "${det:-never}" "$back" "$back_addr"
echo "measured: $P: lane took $((($(now_ms) - lane_start) / 1000)) s, stream $got_a bytes in the fault-free minute"
t_done
