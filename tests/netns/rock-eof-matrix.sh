#!/usr/bin/env bash
# rock-eof-matrix.sh: every way a program waits for data (18 readers: blocking, MSG_WAITALL, readv, recvmmsg, poll, ppoll, select, pselect, epoll level and edge, stdio, a forked child, Python's select, selectors, epoll and asyncio, socat, curl) through every way a stream through rockd can end short (kill -9 and a restart 0.1 s or 2 s later, SIGTERM past its drain, a forged FIN, rock kill --rockd, a restart with another key, the backend's reset): each cell is the whole stream and exit 0, or an error with a prefix of the stream; never a clean short end, never a hang.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
READER="$top_builddir/tests/eof-reader"
PYREADER="$here/eof-reader.py"
NFQ_FIN="$top_builddir/tests/netem/nfq-fin"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] && [ -x "$READER" ] ||
	t_skip_all "rockd, tests/traffic or tests/eof-reader not built"
[ -x "$NFQ_FIN" ] || t_skip_all "tests/netem/nfq-fin not built (libnetfilter-queue-dev missing)"
for p in socat curl python3; do
	command -v "$p" >/dev/null || t_skip_all "$p not installed"
done
rock_netns_up
nn_on_cleanup drop_fin_rule

READERS="read waitall readv recvmmsg poll ppoll select pselect epoll epoll-et
stdio fork py-select py-selectors py-epoll-et py-asyncio socat curl"
# curl hangs in setlocale() with libasan preloaded (ka-programs.sh):
# there Python's urllib is the HTTP reader.
[ -z "${ROCK_SAN_PRELOAD:-}" ] || READERS=${READERS/curl/py-http}
FAULTS=${ROCK_EOF_FAULTS:-"kill9-0.1 kill9-2 term-drain forged-fin rock-kill other-key backend-reset"}
nreaders=$(wc -w <<<"$READERS")
# Each reader's stream, paced so that every fault lands mid-stream: 6 s
# of it, the fault after its first second; all readers share the path.
case $(nn_profile_base "${NN_PROFILE:-lan}") in
cellular) rate=20000 ;;
dsl | satellite) rate=60000 ;;
*) rate=200000 ;;
esac
# Sanitized programs cost several times the CPU: half the rate, so that
# the tests make -j runs beside this one are not starved.
[ -z "${ROCK_SAN_PRELOAD:-}" ] || rate=$((rate / 2))
bytes=$((rate * 6))
[ "$(nn_profile_base "${NN_PROFILE:-lan}")" = lan ] || bytes=$((rate * 12))
rtt=$(nn_profile_rtt_ms "${NN_PROFILE:-lan}")
# A reader's bound: the stream's time, its reconnects, and where rockd
# never returns (other key) the suspend timeout it is given.
SUSPEND_S=8
bound=$((40 + rtt / 10))
"$TRAFFIC" text "$bytes" >"$t_tmp/expected"
CTL="$t_tmp/rockd.ctl"
QUEUE=7

# shellcheck disable=SC2317 # run by nn_cleanup
drop_fin_rule() { nn_r iptables -w -t mangle -F FORWARD 2>/dev/null; }

# KEY: rockd in front of the backend, draining 1 s at SIGTERM; its own
# pid in rockd_pid. Any earlier one is stopped first.
start_rockd() {
	stop_rockd
	rm -f "$t_tmp/rockd.pid"
	nn_s "$ROCKD" -F -v -k "$1" -p "$t_tmp/rockd.pid" --drain-timeout 1 \
		--control "$CTL" --listen 7000 --backend 127.0.0.1:9000 \
		--listen 7001 --backend 127.0.0.1:9001 2>>"$t_tmp/rockd.log" &
	pids+=($!)
	wait_for 20 test -s "$t_tmp/rockd.pid" && nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 20 ||
		t_fail_all "rockd did not start"
	rockd_pid=$(cat "$t_tmp/rockd.pid")
}
stop_rockd() {
	[ -n "${rockd_pid:-}" ] || return 0
	kill9_rockd
	rockd_pid=
}
# kill -9 of rockd's pid, as a user would; its workers (one per CPU) go
# with it, and are waited for too: a restart needs their ports.
kill9_rockd() {
	local procs
	procs="$rockd_pid $(pgrep -P "$rockd_pid" | tr '\n' ' ')"
	kill -KILL "$rockd_pid" 2>/dev/null
	# shellcheck disable=SC2086 # a list of pids
	wait_for 5 eval "! kill -0 $procs 2>/dev/null"
}
rockd_gone() { ! kill -0 "$rockd_pid" 2>/dev/null; }

# The backends (9001 speaks HTTP): for every connection the text pattern
# at $rate, then its end; every connection resets once $t_tmp/reset exists.
nn_s "$TRAFFIC" serve 9000 "$rate" "$bytes" "$t_tmp/reset" 2>"$t_tmp/serve.err" &
pids+=($!)
nn_s "$TRAFFIC" serve 9001 "$rate" "$bytes" "$t_tmp/reset" http 2>"$t_tmp/serve-http.err" &
pids+=($!)
nn_wait_port "$NN_S" 127.0.0.1 9000 5 && nn_wait_port "$NN_S" 127.0.0.1 9001 5 ||
	t_skip_all "the backends did not start"

# FAULT READER: start that reader under rock; its pid in cell_pid[].
declare -A cell_pid
start_reader() {
	local f=$1 r=$2 d="$t_tmp/$1" st=
	local -a cmd
	case $r in
	py-http) cmd=(python3 "$PYREADER" http "$NN_S_ADDR" 7001 "$d/$r.got") ;;
	py-*) cmd=(python3 "$PYREADER" "${r#py-}" "$NN_S_ADDR" 7000 "$d/$r.got") ;;
	socat) cmd=(socat -d -u "TCP:$NN_S_ADDR:7000" "CREATE:$d/$r.got") ;;
	curl) cmd=(curl -sS -o "$d/$r.got" "http://$NN_S_ADDR:7001/") ;;
	*) cmd=("$READER" "$r" "$NN_S_ADDR" 7000 "$d/$r.got") ;;
	esac
	[ "$f" = other-key ] && st=$SUSPEND_S
	# No shared probe cache: each fault's rockd is a new instance, and
	# a stale announcement's second probe is the connect's business.
	ROCK_DEBUG=1 ROCK_LOG="$d/$r.log" ROCK_SUSPEND_TIMEOUT=${st:-259200} ROCK_PROBE_CACHE= \
		t_foreign nn_c "$ROCK" "${cmd[@]}" >"$d/$r.out" 2>"$d/$r.err" &
	cell_pid[$f.$r]=$! pids+=($!)
}

# PID and its descendants (the reader under ip netns exec and rock), killed.
kill_tree() {
	local c
	for c in $(pgrep -P "$1"); do kill_tree "$c"; done
	kill -KILL "$1" 2>/dev/null
}

# FAULT: each reader has had a second of its stream (or has ended).
all_streaming() {
	local r
	for r in $READERS; do
		[ "$(size "$t_tmp/$1/$r.got")" -ge "$rate" ] ||
			! kill -0 "${cell_pid[$1.$r]}" 2>/dev/null || return 1
	done
}

# The cell's outcome: whole (every byte, exit 0), error (an error, a
# prefix), and the defects: short (a clean end short of the stream),
# corrupt (not a prefix), hang (still running at the bound).
declare -A cell
judge() {
	local f=$1 r=$2 d="$t_tmp/$1" rc=$3 n
	n=$(size "$d/$r.got")
	# socat 1.7 reports a reset by a warning and exits 0, on plain TCP
	# as under rock (doc/transparency.md): its warning is its error.
	if [ "$r" = socat ] && [ "$rc" = 0 ] && grep -q ' [EW] read(.*): ' "$d/$r.err"; then
		rc=1
	fi
	if [ "$rc" = hang ]; then
		cell[$f.$r]=hang
	elif ! cmp -s -n "$n" "$d/$r.got" "$t_tmp/expected"; then
		cell[$f.$r]=corrupt
	elif [ "$rc" = 0 ] && [ "$n" -eq "$bytes" ]; then
		cell[$f.$r]=whole
	elif [ "$rc" = 0 ]; then
		cell[$f.$r]=short
	else
		cell[$f.$r]=error
	fi
}

# The error a reader named: ECONNRESET and the like, or curl's and
# socat's words for it.
named_error() {
	local e="$t_tmp/$1/$2.err"
	case $2 in
	socat) grep -o 'Connection reset by peer\|Connection timed out' "$e" | head -n 1 ;;
	curl) grep -o 'Connection reset by peer\|Connection timed out' "$e" | head -n 1 ;;
	*) sed -n 's/.*: error \([A-Z]*\) after .*/\1/p' "$e" | head -n 1 ;;
	esac
}

# FAULT: what it does to rockd, the backend or the path, mid-stream.
inject() {
	local id
	case $1 in
	kill9-0.1 | kill9-2)
		kill9_rockd
		nap "${1#kill9-}"
		start_rockd "$t_tmp/key" ;;
	term-drain)
		kill -TERM "$rockd_pid"
		wait_for 10 rockd_gone
		start_rockd "$t_tmp/key" ;;
	rock-kill)
		for id in $("$ROCK" ls --json --rockd "$CTL" | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r.get("source") == "rockd": print(r["id"])'); do
			"$ROCK" kill --rockd "$CTL" "$id" >>"$t_tmp/kill.log" 2>&1
		done ;;
	other-key)
		kill9_rockd
		start_rockd "$t_tmp/key2" ;;
	backend-reset)
		touch "$t_tmp/reset" ;;
	esac
}

# The router sets a FIN in each of the streams from rockd once past
# AFTER bytes: a FIN nobody sent.
fin_box() {
	rm -f "$t_tmp/fin.ready"
	nn_r "$NFQ_FIN" -a -r "$t_tmp/fin.ready" "$QUEUE" 7000-7001 "$1" 2>"$t_tmp/fin.log" &
	pids+=($!)
	wait_for 5 test -s "$t_tmp/fin.ready" || t_skip_all "nfq-fin did not start"
	fin_pid=$(cat "$t_tmp/fin.ready")
	nn_r iptables -w -t mangle -A FORWARD -p tcp --sport 7000:7001 -j NFQUEUE --queue-num "$QUEUE"
}

reconnects=0
for f in $FAULTS; do
	mkdir -p "$t_tmp/$f"
	rm -f "$t_tmp/reset"
	start_rockd "$t_tmp/key"
	[ "$f" = forged-fin ] && fin_box $((rate * 3 / 2))
	start=$(now_ms)
	for r in $READERS; do start_reader "$f" "$r"; done
	if [ "$f" != forged-fin ]; then
		# Every reader a rock in mid-stream first: on a slow path
		# sixteen handshakes at once take seconds, and a connect cut
		# by the fault is a plain connection's business.
		wait_for 30 all_streaming "$f" || nn_log "$f: not all streaming"
		# What is tested is how a rock ends: a connect whose probe a
		# lossy path made pass for plain (rock-probe-lost.sh's
		# business) is made again, twice at most, and counted.
		for try in 1 2; do
			again=
			for r in $READERS; do
				grep -q ': a rock$' "$t_tmp/$f/$r.log" 2>/dev/null && continue
				nn_log "$f: $r not a rock at connect ($(grep -o 'no rock ([^)]*)' "$t_tmp/$f/$r.log" | head -n 1)): again"
				kill_tree "${cell_pid[$f.$r]}"
				wait "${cell_pid[$f.$r]}" 2>/dev/null
				start_reader "$f" "$r"
				again="$again $r"
				reconnects=$((reconnects + 1))
			done
			[ -n "$again" ] || break
			wait_for 30 all_streaming "$f" || nn_log "$f: not all streaming"
		done
		nn_log "$f: after $(($(now_ms) - start)) ms"
		inject "$f"
	fi
	end=$(($(now_ms) + bound * 1000))
	for r in $READERS; do
		left=$(((end - $(now_ms)) / 1000))
		if wait_pid "${cell_pid[$f.$r]}" $((left > 0 ? left : 0)); then
			judge "$f" "$r" "$waited"
		else
			kill_tree "${cell_pid[$f.$r]}"
			judge "$f" "$r" hang
		fi
	done
	nn_log "$f: done after $(($(now_ms) - start)) ms"
	if [ "$f" = forged-fin ]; then
		drop_fin_rule
		kill "$fin_pid" 2>/dev/null
		t_check "forged-fin: the router forged a FIN in each of the $nreaders streams ($(grep -c '^fin: set' "$t_tmp/fin.log"))" \
			test "$(grep -c '^fin: set' "$t_tmp/fin.log")" -ge "$nreaders"
	fi
done
stop_rockd

# The matrix, then the checks: every cell whole or an error, as the fault
# makes it (a forged FIN is survived; every other fault ends the session),
# with the error each fault must give.
printf '%-13s' reader
for f in $FAULTS; do printf ' %-13s' "$f"; done
echo
for r in $READERS; do
	printf '%-13s' "$r"
	for f in $FAULTS; do printf ' %-13s' "${cell[$f.$r]}"; done
	echo
done
for f in $FAULTS; do
	counts=$(for r in $READERS; do echo "${cell[$f.$r]}"; done | sort | uniq -c |
		awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
	want=error
	[ "$f" = forged-fin ] && want=whole
	bad=
	for r in $READERS; do
		[ "${cell[$f.$r]}" = "$want" ] || bad="$bad $r=${cell[$f.$r]}"
	done
	t_check "$f: every reader $( [ $want = whole ] && echo 'has the whole stream, exit 0' ||
		echo 'fails with a prefix of the stream') ($counts)${bad:+; not:$bad}" test -z "$bad"
	[ "$f" = forged-fin ] && continue
	errname=ECONNRESET words='Connection reset by peer'
	[ "$f" = other-key ] && errname=ETIMEDOUT words='Connection timed out'
	bad=
	for r in $READERS; do
		e=$(named_error "$f" "$r")
		case $r in
		socat | curl) [ "$e" = "$words" ] || bad="$bad $r=${e:-none}" ;;
		# A relay (stdio's, a fork's) ends its holders' connection
		# with a reset: the one error TCP can carry to them.
		stdio | fork) [ "$e" = ECONNRESET ] || bad="$bad $r=${e:-none}" ;;
		*) [ "$e" = "$errname" ] || bad="$bad $r=${e:-none}" ;;
		esac
	done
	t_check "$f: each error is $errname (ECONNRESET through a relay)${bad:+; not:$bad}" test -z "$bad"
done
# Readiness matches: no wait ends for a FIN the peer did not send, nor
# for a rock the engine holds (the first read after a wakeup finds data,
# the end or the error).
for f in $FAULTS; do
	empties=$(cat "$t_tmp/$f"/*.err | sed -n 's/.*: empty wakeups \([0-9]*\)$/\1/p' |
		awk '{ n += $1 } END { print n + 0 }')
	woken=$(grep -l 'empty wakeups [1-9]' "$t_tmp/$f"/*.err 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
	t_eq "$f: no poll, select or epoll reader woken for nothing${woken:+ ($woken)}" "$empties" 0
done
notrock=
for f in $FAULTS; do
	for r in $READERS; do
		grep -q ': a rock$' "$t_tmp/$f/$r.log" 2>/dev/null || notrock="$notrock $f.$r"
	done
done
t_check "every reader's connection was a rock${notrock:+; not:$notrock} ($reconnects connects made again after a probe found no rockd)" test -z "$notrock"
t_done
