# rock-lib.sh: what every netns rock test starts with: lib.sh, the harness, the traps, process and timing helpers.
# shellcheck shell=bash

# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/netns.sh"
# nn_setup adopts the EXIT trap as its last cleanup; a signal ends the
# test through it.
trap t_finish EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
# shellcheck disable=SC2034 # used by the sourcing tests
ROCKD="$top_builddir/daemon/rockd"

napper=
now_ms() { date +%s%3N; }

# As root, the namespaces up, and every process in pids=() stopped by pid
# on the way out (then nn_cleanup sweeps the namespaces); else SKIP.
rock_netns_up() {
	nn_require_root
	pids=()
	nn_setup >/dev/null || t_skip_all "could not build the namespaces"
	nn_on_cleanup stop_pids
}

# sshd's privilege separation directory (compiled into sshd): made if
# missing, as the system's sshd would, and left in place. Tests run at once
# (make -j, the matrix's lanes) share it: one that removed it at its exit
# broke the others' logins ("chroot(/run/sshd): No such file or directory").
run_sshd_dir() { [ -d /run/sshd ] || mkdir -p /run/sshd; }

# NAME LOG PATTERN FILE...: passes if the rock client's LOG says its
# connection is a rock; else fails, with FILES' lines matching PATTERN.
t_is_rock() {
	if grep -q ': a rock$' "$2"; then
		t_ok "$1: its connection is a rock"
	else
		t_bad "$1: its connection is a rock"
		grep -h "$3" "${@:4}" | sed 's/^/    /'
	fi
}

# TIMEOUT_S CMD...: wait until CMD succeeds; 1 if it did not in time.
wait_for() {
	local end=$(($(now_ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.1
	done
}
# NUMBERS...: their median (the lower middle one).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# FILE: its size in bytes, 0 while it does not exist.
size() { stat -c %s "$1" 2>/dev/null || echo 0; }

nap() {
	sleep "$1" &
	napper=$!
	wait "$napper"
	napper=
}

# Kill (TERM, then KILL) every process this script started and reap it.
# shellcheck disable=SC2317 # run by nn_cleanup
stop_pids() {
	local p i
	[ -z "${napper:-}" ] || kill "$napper" 2>/dev/null
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for ((i = 0; i < 20; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	pids=()
}

# PID TIMEOUT_S: wait for PID to exit; 0 if it did (status in $waited), 1 if not.
wait_pid() {
	local pid=$1 end
	end=$(($(now_ms) + $2 * 1000))
	while kill -0 "$pid" 2>/dev/null; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.1
	done
	wait "$pid"
	# shellcheck disable=SC2034 # read by the sourcing script
	waited=$?
	return 0
}

# LOG AFTER_MS TRANSITION: wall-clock ms of rockcat's first TRANSITION line
# ("CONNECTED -> SUSPENDED") stamped at or after AFTER_MS; empty if none.
# shellcheck disable=SC2317 # called through wait_ms
cat_ms() {
	awk -v t="$2" -v tr="$3" '$1 == "rockcat:" && $2 ~ /^[0-9]+$/ && $2 >= t &&
		index($0, " " tr) { print $2; exit }' "$1"
}

# LOG AFTER_MS TRANSITION: wall-clock ms of the first state change
# TRANSITION ("CONNECTED -> SUSPENDED") at or after AFTER_MS in a log of
# rockd's or librock's (ROCK_LOG); empty if none. Their lines start with an
# ISO 8601 UTC timestamp with milliseconds.
# shellcheck disable=SC2317 # called through wait_ms
rockd_ms() {
	local ts ms
	while read -r ts; do
		ms=$(date -u -d "$ts" +%s%3N) || continue
		[ "$ms" -lt "$2" ] || { echo "$ms"; return; }
	done < <(grep -- "rock [0-9a-f]*: $3" "$1" | awk '{ print $1 }')
}
