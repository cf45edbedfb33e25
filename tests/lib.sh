# lib.sh: shared helpers of the test scripts (paths, results, a temp dir kept only on failure).
# shellcheck shell=bash

: "${top_builddir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
ROCK="$top_builddir/tools/rock"
LIBROCK="$top_builddir/lib/.libs/librock.so"
# In a sanitizer build the runtimes must be preloaded ahead of librock.so;
# make check passes their paths (empty otherwise).
ROCK_SAN_PRELOAD=${ROCK_SAN_PRELOAD:-}
LIBROCK_PRELOAD="${ROCK_SAN_PRELOAD:+$ROCK_SAN_PRELOAD:}$LIBROCK"
if [ -n "$ROCK_SAN_PRELOAD" ]; then
	# Programs started with a preload list that does not begin with the
	# ASan runtime (by the tests on purpose) must still start.
	export ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
# t_foreign CMD...: run a program that is not ours (ssh, socat, python3).
# In a sanitizer build its own leaks at exit are not our findings: leak
# detection is off for it (librock's code is leak-checked in our programs).
t_foreign() {
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$@"
}
t_pass=0
t_fail=0
t_skip=0

# A scratch directory, removed on success or skip (77), kept (and named)
# on failure.
t_tmp=$(mktemp -d "${TMPDIR:-/tmp}/rocktest.XXXXXX")
# Server keys (rockd's, made on first start) and the clients' known
# servers are the test's own: nothing of the user's is read or written.
export XDG_STATE_HOME="$t_tmp/state" XDG_CONFIG_HOME="$t_tmp/config"
# So is the probe cache the clients share: another test's rockd on a port
# reused here is no rockd of this test's.
export XDG_RUNTIME_DIR="$t_tmp/run"
t_finish() {
	local rc=$?
	if [ "$t_fail" -eq 0 ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; }; then
		rm -rf "$t_tmp"
	else
		echo "logs kept in $t_tmp" >&2
	fi
}

t_ok() { t_pass=$((t_pass + 1)); echo "PASS: $*"; }
t_bad() { t_fail=$((t_fail + 1)); echo "FAIL: $*"; }
t_skipped() { t_skip=$((t_skip + 1)); echo "SKIP: $*"; }

# t_check NAME COMMAND...: passes when the command exits 0.
t_check() {
	local name=$1
	shift
	if "$@"; then t_ok "$name"; else t_bad "$name"; fi
}

# t_eq NAME GOT WANT
t_eq() {
	if [ "$2" = "$3" ]; then t_ok "$1"; else t_bad "$1: got '$2', want '$3'"; fi
}

# Print the closing line and exit with the automake code.
t_done() {
	echo "$t_pass passed, $t_fail failed, $t_skip skipped"
	[ "$t_fail" -eq 0 ] || exit 1
	[ "$t_pass" -gt 0 ] || exit 77
	exit 0
}

# PORT: something listens on it (any address, this namespace).
# shellcheck disable=SC2317 # run by the tests' wait loops
listening() { ss -Htln "sport = :$1" | grep -q .; }

# rockd_started LOG PID [SECONDS]: rockd (PID) has logged that it started
# (within SECONDS, 20); 1 if it exited or the time passed first.
rockd_started() {
	local i
	for ((i = 0; i < ${3:-20} * 20; i++)); do
		rockd_up "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	rockd_up "$1"
}
# rockd_up LOG: rockd has started, every worker of it: a lone rockd's
# "rocks V started", or the master's "N workers started" once all listen.
rockd_up() { grep -Eq ': info: [a-z_]+: ([^ ]+ [^ ]+|[0-9]+ workers) started$' "$1"; }

# t_fail_all REASON: a failure that ends the test at once (a daemon that
# did not start is broken, not missing); its logs are kept.
t_fail_all() {
	t_bad "$*"
	t_done
}

t_skip_all() {
	echo "SKIP: $*"
	exit 77
}

# t_kill_on_exit: every process whose pid a test adds to pids is killed
# (and reaped) on every exit path, before the scratch directory goes.
t_kill_on_exit() {
	pids=()
	trap t_kill_and_finish EXIT
	trap 'exit 1' INT TERM HUP
}
t_kill_and_finish() {
	local rc=$? p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	(exit "$rc")
	t_finish
}

# free_port: a port on 127.0.0.1 free now for TCP and for UDP too (rockd's
# control channel takes its first service's number; a rock client's
# engine holds a UDP port from the same ephemeral range).
free_port() {
	python3 -c '
import socket
while True:
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(port)
    break
'
}
