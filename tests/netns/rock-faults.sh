#!/usr/bin/env bash
# rock-faults.sh: 64 MiB each way through rockd stay byte-exact on one backend connection across blackholes, RSTs, link loss and an address change.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
ROCKCAT="$top_builddir/tools/rockcat"
if [ ! -x "$ROCKD" ] || [ ! -x "$ROCKCAT" ]; then
	t_skip_all "rockd or rockcat not built"
fi
for t in socat sha256sum cmp; do
	command -v "$t" >/dev/null || t_skip_all "$t not installed"
done
nn_require_root
pids=()
nn_setup >/dev/null || t_skip_all "could not build the namespaces"
# On every way out: the big files go (on failure the logs stay, with a cmp
# report); before that our own processes, by pid (nn_cleanup then sweeps the
# namespaces).
nn_on_cleanup rm_bins
nn_on_cleanup stop_pids

# ROCK_SKIP_LONG=1 skips the 60 s blackhole; ROCK_FAULTS_CASES picks cases;
# ROCK_FAULTS_MIB and ROCK_FAULTS_MBIT (tbf rate, each way) size them;
# ROCK_FAULTS_LOGDIR, if set, receives a copy of every case's logs.
# On a path profile (NN_PROFILE) the transfer is sized to what one TCP flow
# gets there (doc/paths.md: dsl 18.7 Mbit/s, satellite 8.2, cellular 0.7),
# so that it is still going at the fault and ends within the case's bound.
case $(nn_profile_base "${NN_PROFILE:-lan}") in
cellular) def_mib=2 tcp_kbit=500 ;;
satellite | wan) def_mib=8 tcp_kbit=5000 ;;
dsl) def_mib=16 tcp_kbit=15000 ;;
*) def_mib=64 tcp_kbit=40000 ;;
esac
mib=${ROCK_FAULTS_MIB:-$def_mib}
mbit=${ROCK_FAULTS_MBIT:-40}
cases=${ROCK_FAULTS_CASES:-blackhole long-blackhole tcp-blackhole rst link addr}
bytes=$((mib * 1048576))
[ "$tcp_kbit" -le $((mbit * 1000)) ] || tcp_kbit=$((mbit * 1000))
xfer_s=$((bytes * 8 / (tcp_kbit * 1000) + 1)) # clean transfer time on this path

# Both router egresses are rate-limited so a transfer lasts long enough to be
# hit mid-stream: rc0 carries server->client, rs0 client->server.
for dev in "$NN_R_CIF" "$NN_R_SIF"; do
	nn_r tc qdisc replace dev "$dev" root tbf rate "${mbit}mbit" burst 64kb latency 400ms ||
		t_skip_all "tbf not available"
done
head -c "$bytes" /dev/urandom >"$t_tmp/cli_out.bin"
head -c "$bytes" /dev/urandom >"$t_tmp/srv_out.bin"
sum_cli_out=$(sha256sum <"$t_tmp/cli_out.bin")
sum_srv_out=$(sha256sum <"$t_tmp/srv_out.bin")


# shellcheck disable=SC2317 # run by nn_cleanup
rm_bins() { rm -f "$t_tmp"/*.bin "$t_tmp"/*/*.bin; }

# S: sleep S seconds; a signal's trap runs at once, not after the sleep.



# FILE PATTERN TIMEOUT_S: wait until a line of FILE matches PATTERN.
wait_line() {
	local end
	end=$(($(now_ms) + $3 * 1000))
	until grep -q -- "$2" "$1" 2>/dev/null; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.05
	done
}


# LOG AFTER_MS TRANSITION TIMEOUT_S: wait for such a line of rockcat's.
wait_state() {
	local end
	end=$(($(now_ms) + $4 * 1000))
	until [ -n "$(cat_ms "$1" "$2" "$3")" ]; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.05
	done
}

# MS FROM: "N ms" (MS - FROM), or "none" when MS is empty.
ms_or_none() {
	if [ -n "$1" ]; then echo "$(($1 - $2)) ms"; else echo none; fi
}

# LOG FAULT_MS RESTORE_MS: rockcat's state changes, in ms from the fault.
timeline() {
	awk -v f="$2" -v r="$3" '$1 == "rockcat:" && $2 ~ /^[0-9]+$/ && $5 == "->" {
		s = s sprintf(" %+d %s;", $2 - f, $6) }
		END { printf "    client states (ms from the fault, restore at %+d):%s\n", r - f, s }' "$1"
}

# NAME SIZE FILE SUM ORIG: assert that FILE holds SIZE bytes with sha256 SUM
# (a copy of ORIG); on a mismatch, say where it starts.
check_copy() {
	local got
	got=$(sha256sum <"$3")
	if [ "$got" = "$4" ]; then
		t_ok "$1: $2 bytes byte-exact"
		return
	fi
	t_bad "$1: sha256 differs ($(stat -c %s "$3") of $2 bytes arrived)"
	cmp "$3" "$5" 2>&1 | head -1 | sed 's/^/    /'
}

# Bytes that have reached FILE so far.
size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }

# The faults. hold: how long each lasts (s); fault NAME inject|restore.
declare -A hold=([blackhole]=5 [long-blackhole]=60 [tcp-blackhole]=15 [rst]=3 [link]=5 [addr]=0)
fault() {
	case $1/$2 in
	blackhole/inject | long-blackhole/inject) nn_blackhole both ;;
	tcp-blackhole/inject) nn_tcp_blackhole both ;;
	*blackhole/restore | rst/restore) nn_restore ;;
	rst/inject) nn_rst_inject both ;;
	link/inject) nn_link_down ;;
	link/restore) nn_link_up ;;
	addr/inject) nn_change_client_addr >/dev/null ;; # sets NN_C_ADDR
	addr/restore) ;;                                  # nothing to undo
	*) return 2 ;;
	esac
}

port=7000
# NAME: one transfer through a fresh backend, rockd and rockcat, with fault NAME
# injected a few seconds in.
run_case() {
	local name=$1 d="$t_tmp/$1" bport cport bpid dpid cpid start fault
	local restore t_det t_rec d_det n_susp left end
	mkdir -p "$d"
	port=$((port + 2))
	bport=$((port + 1)) cport=$port
	start=$(now_ms)

	# The backend accepts ONE connection (no fork): a second backend
	# connection from rockd would be refused. -t: socat would otherwise
	# cut the other direction 0.5 s after the first one's end.
	ip netns exec "$NN_S" socat -t 600 "TCP4-LISTEN:$bport,bind=127.0.0.1,reuseaddr" \
		SYSTEM:"cat '$t_tmp/srv_out.bin' & cat > '$d/srv_in.bin'; wait" \
		2>"$d/backend.log" &
	bpid=$! pids+=("$bpid")
	ip netns exec "$NN_S" "$ROCKD" -F -v --listen "$cport" --backend "127.0.0.1:$bport" \
		2>"$d/rockd.log" &
	dpid=$! pids+=("$dpid")
	if ! nn_wait_port "$NN_S" 127.0.0.1 "$bport" 5 ||
		! nn_wait_port "$NN_S" "$NN_S_ADDR" "$cport" 5; then
		t_bad "$name: backend or rockd did not start"
		stop_pids
		return
	fi
	ip netns exec "$NN_C" "$ROCKCAT" -s -r -v "$NN_S_ADDR" "$cport" \
		<"$t_tmp/cli_out.bin" >"$d/cli_in.bin" 2>"$d/rockcat.log" &
	cpid=$! pids+=("$cpid")
	if ! wait_line "$d/rockcat.log" ' connected$' 10; then
		t_bad "$name: rockcat did not connect"
		sed 's/^/    /' "$d/rockcat.log" | tail -5
		stop_pids
		return
	fi

	nap 3
	fault=$(now_ms)
	fault "$name" inject || t_bad "$name: could not inject the fault"
	nn_log "$name: fault injected at $(size_of "$d/srv_in.bin") bytes c2s, $(size_of "$d/cli_in.bin") s2c"
	if [ "$(size_of "$d/srv_in.bin")" -ge "$bytes" ] || [ "$(size_of "$d/cli_in.bin")" -ge "$bytes" ]; then
		t_bad "$name: the transfer was over before the fault (raise the size or lower the rate)"
	fi
	nap "${hold[$name]}"
	if [ "${hold[$name]}" -ge 30 ]; then
		# A suspended rock outlives a long outage, on both ends.
		t_check "$name: rockcat still alive after ${hold[$name]}s" kill -0 "$cpid"
		t_eq "$name: rockd still holds the rock" \
			"$(grep -c -e ': ended (' -e ': closed: ' "$d/rockd.log")" 0
	fi
	restore=$(now_ms)
	[ "${hold[$name]}" -gt 0 ] || restore=$fault # one change: fault and repair at once
	fault "$name" restore || t_bad "$name: could not end the fault"
	if [ "$name" = addr ] && wait_state "$d/rockcat.log" "$fault" 'SUSPENDED -> CONNECTED' 10; then
		# The rock's data connection now starts from the new address.
		t_eq "$name: the rock came back from the new address" \
			"$(nn_c ss -Htn state established "( dport = :$cport )" | awk '{ sub(/:[0-9]+$/, "", $3); print $3 }')" \
			"$NN_C_ADDR"
	fi

	left=$((3 * xfer_s + 30))
	if ! wait_pid "$cpid" "$left"; then
		t_bad "$name: rockcat still running ${left}s after the fault ended"
		tail -5 "$d/rockcat.log" | sed 's/^/    /'
		stop_pids
		return
	fi
	t_eq "$name: rockcat exit status" "$waited" 0
	# The backend ends once both its directions are done.
	if wait_pid "$bpid" 10; then
		t_eq "$name: backend exit status" "$waited" 0
	else
		t_bad "$name: backend still running after rockcat ended"
	fi
	end=$(now_ms)

	check_copy "$name: client->server" "$bytes" "$d/srv_in.bin" "$sum_cli_out" "$t_tmp/cli_out.bin"
	check_copy "$name: server->client" "$bytes" "$d/cli_in.bin" "$sum_srv_out" "$t_tmp/srv_out.bin"
	t_eq "$name: rockd opened one backend connection" \
		"$(grep -c 'client connected, backend' "$d/rockd.log")" 1
	# An attempt the client gave up (its SYN unanswered in the fault) can
	# still reach rockd after the restore, its request in the SYN (Fast
	# Open): refused as superseded, rightly; anything else is a fault.
	t_eq "$name: rockd refused nothing but attempts the client had given up" \
		"$(grep -e 'refusing the client' -e 'reconnect rejected' "$d/rockd.log" |
			grep -c -v -e 'an older attempt' -e 'while the attempt in use was open')" 0

	t_det=$(cat_ms "$d/rockcat.log" "$fault" 'CONNECTED -> SUSPENDED')
	n_susp=$(awk '$1 == "rockcat:" && / CONNECTED -> SUSPENDED$/' "$d/rockcat.log" | wc -l)
	if [ -z "$t_det" ]; then
		t_bad "$name: the fault never suspended the rock (the test proved nothing)"
	else
		t_ok "$name: the rock was suspended by the fault"
		t_rec=$(cat_ms "$d/rockcat.log" "$t_det" 'SUSPENDED -> CONNECTED')
		d_det=$(rockd_ms "$d/rockd.log" "$fault" 'CONNECTED -> SUSPENDED')
		echo "measured: $name: detection $((t_det - fault)) ms (client)," \
			"$(ms_or_none "$d_det" "$fault") (rockd); recovery $(ms_or_none "$t_rec" "$restore")" \
			"after the restore; $n_susp suspension(s); case took $(((end - start) / 1000)) s"
		timeline "$d/rockcat.log" "$fault" "$restore"
		grep -m1 'CONNECTED -> SUSPENDED (' "$d/rockcat.log" | sed 's/.*SUSPENDED (/    client: suspended (/'
	fi
	case $name in
	tcp-blackhole)
		# Heartbeats pass: only the stall check can see this.
		t_check "$name: the client judged the data connection stalled" \
			grep -q 'CONNECTED -> SUSPENDED (data connection stalled)' "$d/rockcat.log"
		;;
	rst)
		t_check "$name: the client saw ECONNRESET" \
			grep -q 'CONNECTED -> SUSPENDED (Connection reset by peer)' "$d/rockcat.log"
		;;
	addr)
		t_check "$name: the client noticed the address removal" \
			grep -q 'CONNECTED -> SUSPENDED (local address removed)' "$d/rockcat.log"
		t_check "$name: rockd took the reconnect" grep -q "client reconnected" "$d/rockd.log"
		;;
	esac
	stop_pids
	rm -f "$d"/*.bin
	[ -z "${ROCK_FAULTS_LOGDIR:-}" ] || cp -r "$d" "$ROCK_FAULTS_LOGDIR/"
}

for name in $cases; do
	if [ -z "${hold[$name]+x}" ]; then
		t_bad "unknown case '$name'"
		continue
	fi
	if [ "$name" = long-blackhole ] && [ "${ROCK_SKIP_LONG:-0}" = 1 ]; then
		t_skipped "long-blackhole: 60 s blackhole (ROCK_SKIP_LONG=1)"
		continue
	fi
	run_case "$name"
done
t_done
