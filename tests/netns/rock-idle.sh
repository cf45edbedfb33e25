#!/usr/bin/env bash
# rock-idle.sh: an idle rock through rockd detects a blackhole in ~3 s and reconnects after it; with UDP blocked it stays up and falls back on TCP keepalive.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
ROCKCAT="$top_builddir/tools/rockcat"
if [ ! -x "$ROCKD" ] || [ ! -x "$ROCKCAT" ]; then
	t_skip_all "rockd or rockcat not built"
fi
command -v socat >/dev/null || t_skip_all "socat not installed"
nn_require_root
pids=()                # every process we start, killed by pid on the way out
fds=()                 # the fifo descriptors we hold (children must not)
declare -A cpid cfd sfd # per rock: rockcat's pid, our ends of its two fifos
nn_setup >/dev/null || t_skip_all "could not build the namespaces"
nn_on_cleanup keep_logs
nn_on_cleanup stop_pids


# ROCK_IDLE_LOGDIR, if set, receives a copy of the logs.
# shellcheck disable=SC2317 # run by nn_cleanup
keep_logs() {
	[ -z "${ROCK_IDLE_LOGDIR:-}" ] || cp -r "$t_tmp"/. "$ROCK_IDLE_LOGDIR/"
}

# S: sleep S seconds; a signal's trap runs at once, not after the sleep.


# CMD...: exec CMD with none of our fifo descriptors (run it with &).
bare() {
	local fd
	for fd in "${fds[@]}"; do exec {fd}>&-; done
	exec "$@"
}



# FN LOG AFTER_MS TRANSITION TIMEOUT_S: wait until FN (cat_ms or rockd_ms)
# finds the line; print its time. Fails (printing nothing) on timeout.
wait_ms() {
	local fn=$1 end ms
	end=$(($(now_ms) + $5 * 1000))
	until ms=$("$fn" "$2" "$3" "$4") && [ -n "$ms" ]; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.05
	done
	echo "$ms"
}

# Transitions rockcat printed for rock NAME (a count).
n_lines() {
	awk -v tr="$2" '$1 == "rockcat:" && $2 ~ /^[0-9]+$/ && index($0, " " tr)' \
		"$t_tmp/$1/rockcat.log" | wc -l
}

# NAME PORT: a backend (one connection), rockd and an idle rockcat whose
# stdin and the backend's output are fifos we hold open.
start_rock() {
	local name=$1 port=$2 bport=$(($2 + 1)) d="$t_tmp/$1" fd
	mkdir -p "$d"
	mkfifo "$d/c2s" "$d/s2c"
	: >"$d/want_c2s"
	: >"$d/want_s2c"
	exec {fd}<>"$d/c2s"
	cfd[$name]=$fd fds+=("$fd")
	exec {fd}<>"$d/s2c"
	sfd[$name]=$fd fds+=("$fd")
	bare ip netns exec "$NN_S" socat -t 600 "TCP4-LISTEN:$bport,bind=127.0.0.1,reuseaddr" \
		SYSTEM:"cat '$d/s2c' & cat > '$d/srv_in'; wait" 2>"$d/backend.log" &
	pids+=("$!")
	bare ip netns exec "$NN_S" "$ROCKD" -F -v --listen "$port" --backend "127.0.0.1:$bport" \
		2>"$d/rockd.log" &
	pids+=("$!")
	nn_wait_port "$NN_S" 127.0.0.1 "$bport" 5 && nn_wait_port "$NN_S" "$NN_S_ADDR" "$port" 5 ||
		return 1
	bare ip netns exec "$NN_C" "$ROCKCAT" -s -r -v "$NN_S_ADDR" "$port" \
		<"$d/c2s" >"$d/cli_in" 2>"$d/rockcat.log" &
	cpid[$name]=$! pids+=("$!")
	wait_ms cat_ms "$d/rockcat.log" 0 'SUSPENDED -> CONNECTED' 10 >/dev/null
}

# FILE WANT: wait (max 5 s) until FILE's content equals WANT's.
# shellcheck disable=SC2317 # called through t_check
same_soon() {
	local i
	for ((i = 0; i < 100; i++)); do
		cmp -s "$1" "$2" && return 0
		sleep 0.05
	done
	return 1
}

# NAME WHEN: a line each way on rock NAME must arrive exactly.
exchange() {
	local d="$t_tmp/$1" c="client $1 $2 $RANDOM" s="server $1 $2 $RANDOM"
	echo "$c" >>"$d/want_c2s"
	echo "$s" >>"$d/want_s2c"
	echo "$c" >&"${cfd[$1]}"
	echo "$s" >&"${sfd[$1]}"
	t_check "$1: a line reaches the backend $2" same_soon "$d/srv_in" "$d/want_c2s"
	t_check "$1: a line reaches the client $2" same_soon "$d/cli_in" "$d/want_s2c"
}

# NAME: close both streams of rock NAME (end of input on both sides).
close_rock() {
	local fd keep=() f
	for fd in "${cfd[$1]}" "${sfd[$1]}"; do exec {fd}>&-; done
	for f in "${fds[@]}"; do
		[ "$f" = "${cfd[$1]}" ] || [ "$f" = "${sfd[$1]}" ] || keep+=("$f")
	done
	fds=("${keep[@]}")
}

# NAME TIMEOUT_S WHAT: rockcat must end cleanly within TIMEOUT_S with
# everything delivered; 1 if it is still running.
reap_rock() {
	local d="$t_tmp/$1"
	if ! wait_pid "${cpid[$1]}" "$2"; then
		t_bad "$1: rockcat still running ${2}s after both ends closed $3"
		return 1
	fi
	t_eq "$1: rockcat exit status after both ends closed $3" "$waited" 0
	t_check "$1: the backend got exactly what was sent" cmp -s "$d/srv_in" "$d/want_c2s"
	t_check "$1: the client got exactly what was sent" cmp -s "$d/cli_in" "$d/want_s2c"
}

# MS FROM: MS - FROM, or "none" when MS is empty.
delta() {
	if [ -n "$1" ]; then echo "$(($1 - $2))"; else echo none; fi
}

# MS BOUND WHAT: assert MS is a number and at most BOUND.
within() {
	if [ "$1" = none ]; then
		t_bad "$3: never happened"
	elif [ "$1" -le "$2" ]; then
		t_ok "$3: $1 ms <= $2 ms"
	else
		t_bad "$3: $1 ms, want <= $2 ms"
	fi
}

# ---- 1. idle rock, blackhole, restore --------------------------------------
d="$t_tmp/idle"
start_rock idle 7000 || { t_bad "idle: rock did not come up"; t_done; }
exchange idle "before the fault"
nap 1.5 # idle, heartbeats only
fault=$(now_ms)
nn_blackhole both
c_det=$(wait_ms cat_ms "$d/rockcat.log" "$fault" 'CONNECTED -> SUSPENDED' 10)
d_det=$(wait_ms rockd_ms "$d/rockd.log" "$fault" 'CONNECTED -> SUSPENDED' 5)
# The outage lasts 5 s (longer if detection is slow), as a real one would.
nap "$(awk -v t="$((fault + 5000 - $(now_ms)))" 'BEGIN { print (t > 0 ? t : 0) / 1000 }')"
restore=$(now_ms)
nn_restore
c_rec=$(wait_ms cat_ms "$d/rockcat.log" "$restore" 'SUSPENDED -> CONNECTED' 10)
d_rec=$(wait_ms rockd_ms "$d/rockd.log" "$restore" 'SUSPENDED -> CONNECTED' 2)
echo "measured: idle detection $(delta "$c_det" "$fault") ms (target 3000)"
echo "measured: idle detection on rockd $(delta "$d_det" "$fault") ms (target 3000)"
echo "measured: reconnect $(delta "$c_rec" "$restore") ms after restore (target 1000)"
within "$(delta "$c_det" "$fault")" 6000 "idle: client detection"
within "$(delta "$d_det" "$fault")" 6000 "idle: rockd detection"
within "$(delta "$c_rec" "$restore")" 3000 "idle: client reconnect after the restore"
t_check "idle: rockd took the reconnect" test -n "$d_rec"
exchange idle "after the reconnect"
t_eq "idle: suspensions" "$(n_lines idle 'CONNECTED -> SUSPENDED')" 1
close_rock idle
reap_rock idle 10 ""

# ---- 2. UDP blocked, TCP open ---------------------------------------------
# "verified" heard heartbeats before UDP went; "blocked" never hears one.
udp_block() {
	nn_r iptables -w "$1" FORWARD -p udp -j DROP && nn_r ip6tables -w "$1" FORWARD -p udp -j DROP
}
start_rock verified 7010 || { t_bad "verified: rock did not come up"; t_done; }
nap 1.5
udp_block -I || t_bad "could not block UDP"
blocked_at=$(now_ms)
start_rock blocked 7020 || { t_bad "blocked: rock did not come up"; t_done; }
nap 8 # idle, UDP blocked
for r in verified blocked; do
	t_eq "$r: not suspended in 8 s of idle time without UDP" \
		"$(n_lines "$r" 'CONNECTED -> SUSPENDED')" 0
	t_eq "$r: rockd did not suspend it either" "$(rockd_ms "$t_tmp/$r/rockd.log" 0 'CONNECTED -> SUSPENDED')" ""
done
# Proof the path really had no UDP: the router dropped heartbeats, and the
# clients armed their TCP keepalive backstop.
dropped=$(nn_r iptables -w -L FORWARD -v -n -x | awk '$3 == "DROP" && $4 ~ /^(udp|17)$/ { print $1; exit }')
t_check "the router dropped UDP (${dropped:-0} packets)" test "${dropped:-0}" -gt 0
for r in verified blocked; do
	t_check "$r: TCP keepalive backstop armed" grep -q 'kernel keepalive backstop armed' "$t_tmp/$r/rockcat.log"
	exchange "$r" "with UDP blocked"
done

# Everything blackholed: only the TCP keepalive fallback can tell.
fault=$(now_ms)
nn_blackhole both
for r in verified blocked; do
	det=$(wait_ms cat_ms "$t_tmp/$r/rockcat.log" "$fault" 'CONNECTED -> SUSPENDED' 12)
	echo "measured: $r (UDP blocked): detection $(delta "$det" "$fault") ms by the TCP fallback"
	within "$(delta "$det" "$fault")" 8000 "$r: suspended by the blackhole without UDP"
	grep -m1 'CONNECTED -> SUSPENDED (' "$t_tmp/$r/rockcat.log" | sed 's/.*SUSPENDED (/    suspended (/'
done
nap 1
restore=$(now_ms)
nn_restore
for r in verified blocked; do
	rec=$(wait_ms cat_ms "$t_tmp/$r/rockcat.log" "$restore" 'SUSPENDED -> CONNECTED' 10)
	echo "measured: $r (UDP blocked): reconnect $(delta "$rec" "$restore") ms after restore"
	within "$(delta "$rec" "$restore")" 3000 "$r: reconnected without UDP"
	exchange "$r" "after the reconnect without UDP"
done
# Closing needs no UDP either.
closed_at=$(now_ms)
close_rock verified
close_rock blocked
late=()
for r in verified blocked; do
	reap_rock "$r" 5 "with UDP blocked" || late+=("$r")
done
udp_block -D || t_bad "could not unblock UDP"
unblocked=$(now_ms)
for r in "${late[@]}"; do
	n=$(awk -v t="$closed_at" '$1 == "rockcat:" && $2 >= t && / CONNECTED -> SUSPENDED$/' \
		"$t_tmp/$r/rockcat.log" | wc -l)
	echo "    $r: suspended and reconnected $n time(s) in the $((($(now_ms) - closed_at) / 1000)) s since both ends closed"
	if reap_rock "$r" 5 "and UDP came back"; then
		echo "    $r: closed only $(($(now_ms) - unblocked)) ms after UDP came back"
	fi
done
echo "UDP case: $((($(now_ms) - blocked_at) / 1000)) s"
t_done
