#!/usr/bin/env bash
# rock-probe-cache.sh: the probe cache the user's processes share: a second process's first connect to a rockd makes no probe and resumes with the first's ticket; a corrupt or foreign cache file is ignored with one log line.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
TRAFFIC="$top_builddir/tests/traffic"
ECHOD="$top_builddir/tests/echod"
t_kill_on_exit
command -v python3 >/dev/null || t_skip_all "python3 not found"
command -v socat >/dev/null || t_skip_all "socat not installed"
# Tickets are shared only through a file system in memory, as the usual
# runtime directory is: the test's own, on /dev/shm.
fs_type() { stat -f -c %T "$1" 2>/dev/null; }
[ "$(fs_type /dev/shm)" = tmpfs ] || t_skip_all "/dev/shm is not a tmpfs"
shm_run=$(mktemp -d /dev/shm/rocktest-run.XXXXXX) || t_skip_all "no directory on /dev/shm"
trap 'rc=$?; rm -rf "$shm_run"; (exit $rc); t_kill_and_finish' EXIT
export XDG_RUNTIME_DIR="$shm_run"


be=$(free_port)
"$ECHOD" "$be" &
pids+=($!)
for _ in $(seq 100); do listening "$be" && break; sleep 0.05; done
# Taken only now: free_port cannot hand out the backend's port again.
port=$(free_port)
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\n' "$port" "$be" >"$t_tmp/rockd.conf"
"$ROCKD" -F -v -f "$t_tmp/rockd.conf" 2>"$t_tmp/rockd.log" &
rockd_pid=$!
pids+=("$rockd_pid")
if ! rockd_started "$t_tmp/rockd.log" "$rockd_pid"; then
	t_bad "rockd did not start within 20 s: $(tail -n 3 "$t_tmp/rockd.log" | tr '\n' ' ')"
	t_done
fi

cache="$XDG_RUNTIME_DIR/rock/probes"
n=0
# connect NAME: one process, one connect under rock, its log in NAME.log;
# then the probes and the rocks rockd has seen so far.
connect() {
	n=$((n + 1))
	ROCK_LOG="$t_tmp/$1.log" ROCK_DEBUG=1 "$ROCK" "$TRAFFIC" connect 127.0.0.1 "$port" 1 \
		>"$t_tmp/$1.out" 2>&1 || echo "rc=$?" >>"$t_tmp/$1.out"
	# rockd logs the rock once the handshake is done: wait for it.
	for _ in $(seq 100); do
		[ "$(grep -c 'client connected, backend' "$t_tmp/rockd.log")" -ge "$n" ] && break
		sleep 0.02
	done
	probes=$(grep -c 'probe from a rock client' "$t_tmp/rockd.log")
	rocks=$(grep -c 'client connected, backend' "$t_tmp/rockd.log")
	resumed=$(grep -c 'connected as server (resumed)' "$t_tmp/rockd.log")
}
warnings() { grep -c "warning: .*probe cache" "$t_tmp/$1.log"; }

# --- 1. the first process probes and records what it found ------------------
connect first
t_eq "first process: one probe" "$probes" 1
t_eq "first process: a rock" "$rocks" 1
t_eq "the cache file is private" "$(stat -c '%a %u' "$cache")" "600 $(id -u)"
t_eq "its directory is private" "$(stat -c '%a %u' "${cache%/*}")" "700 $(id -u)"

# --- 2. a second process takes the first's finding: no probe ----------------
connect second
t_eq "second process: no probe" "$probes" 1
t_eq "second process: a rock" "$rocks" 2
t_check "second process: the shared cache said rockd" \
	grep -q "a rockd, by the shared probe cache" "$t_tmp/second.log"

# --- 2a. tickets: the first process's full handshake left one in the file;
#         the second resumed with it; a process that shares nothing cannot --
t_eq "first process: a full handshake, second: resumed by its ticket" "$resumed" 1
# A third, socat through rockd's echo backend: resumed too, byte-exact.
printf 'through a resumed rock\n' >"$t_tmp/third.in"
ROCK_LOG="$t_tmp/third.log" ROCK_DEBUG=1 t_foreign "$ROCK" socat -t 5 - "TCP:127.0.0.1:$port" \
	<"$t_tmp/third.in" >"$t_tmp/third.got" 2>"$t_tmp/third.err" || echo "rc=$?" >>"$t_tmp/third.out"
n=$((n + 1))
t_eq "third process (socat): its line echoed exactly" "$(cat "$t_tmp/third.got")" "through a resumed rock"
t_eq "third process: resumed too (the ticket is the file's)" \
	"$(grep -c 'connected as server (resumed)' "$t_tmp/rockd.log")" 2
ROCK_PROBE_CACHE= ROCK_LOG="$t_tmp/unshared.log" ROCK_DEBUG=1 "$ROCK" "$TRAFFIC" \
	connect 127.0.0.1 "$port" 1 >"$t_tmp/unshared.out" 2>&1 || echo "rc=$?" >>"$t_tmp/unshared.out"
n=$((n + 1))
for _ in $(seq 100); do
	[ "$(grep -c 'client connected, backend' "$t_tmp/rockd.log")" -ge "$n" ] && break
	sleep 0.02
done
t_eq "a process that shares no cache: a full handshake" \
	"$(grep -c 'connected as server (resumed)' "$t_tmp/rockd.log")" 2

# rockd_stop; rockd_start N: rockd again, its Nth start.
rockd_stop() { kill "${pids[1]}" && wait "${pids[1]}" 2>/dev/null; }
rockd_start() {
	"$ROCKD" -F -v -f "$t_tmp/rockd.conf" 2>>"$t_tmp/rockd.log" &
	pids[1]=$!
	for _ in $(seq 100); do
		[ "$(grep -c 'started' "$t_tmp/rockd.log")" -ge "$1" ] && listening "$port" && break
		sleep 0.05
	done
}

# --- 2b. rockd restarted (a new announcement): the cached one is refused
#         STALE, the client probes again and still makes a rock -------------
rockd_stop
rockd_start 2
connect restarted
t_eq "rockd restarted: the stale announcement costs one probe" "$probes" 3
t_eq "rockd restarted: a rock still" "$rocks" 5
connect after-restart
t_eq "rockd restarted: the new announcement is shared" "$probes" 3
t_eq "rockd restarted: its new ticket resumes the next process" "$resumed" 3

# --- 2c. a connect while rockd is down is refused, and nothing is
#         remembered of it: the rockd back there a moment later gets a rock
#         from the next process (it was taken for plain for a minute) -----
rockd_stop
rm -f "$cache"	# as when the announcement was found stale and forgotten
ROCK_LOG="$t_tmp/down.log" ROCK_DEBUG=1 "$ROCK" "$TRAFFIC" connect 127.0.0.1 "$port" 1 \
	>"$t_tmp/down.txt" 2>&1
t_check "rockd down: the connect is refused ($(tail -n 1 "$t_tmp/down.txt"))" \
	grep -q 'Connection refused' "$t_tmp/down.txt"
rockd_start 3
connect back
t_eq "rockd back: the next process probes it" "$probes" 4
t_eq "rockd back: and makes a rock" "$rocks" 7
t_eq "rockd back: no plain verdict was kept" "$(grep -c 'not enhanced' "$t_tmp/back.log")" 0

# --- 3. a corrupt file: one line, a probe of its own, the file made good -----
printf 'garbage, not a probe cache' >"$cache"
connect corrupt
t_eq "corrupt file: one log line" "$(warnings corrupt)" 1
t_check "corrupt file: the line says what and where" \
	grep -q "probe cache $cache: not a probe cache; ignored" "$t_tmp/corrupt.log"
t_eq "corrupt file: a probe of its own" "$probes" 5
t_eq "corrupt file: a rock still" "$rocks" 8
connect after-corrupt
t_eq "corrupt file: replaced by a good one (no probe next)" "$probes" 5
t_eq "corrupt file: replaced, no line" "$(warnings after-corrupt)" 0

# A file cut short: its size is not its count's.
head -c 100 "$cache" >"$t_tmp/short" && cat "$t_tmp/short" >"$cache"
connect short
t_check "truncated file: ignored with its reason" \
	grep -q "probe cache $cache: corrupt (its size is not its count's); ignored" "$t_tmp/short.log"
t_eq "truncated file: one log line, a probe" "$(warnings short) $probes" "1 6"

# --- 4. a file others may write: not trusted ---------------------------------
chmod 0622 "$cache"
connect shared-mode
t_check "group-writable file: ignored" \
	grep -q "probe cache $cache: accessible by group or others; ignored" "$t_tmp/shared-mode.log"
t_eq "group-writable file: one log line, a probe" "$(warnings shared-mode) $probes" "1 7"

# --- 5. a file another user owns (root only: chown) --------------------------
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	connect refill	# a good file again (ours)
	chown nobody "$cache"
	connect foreign
	t_check "foreign-owned file: ignored" \
		grep -q "probe cache $cache: owned by another user; ignored" "$t_tmp/foreign.log"
	t_eq "foreign-owned file: one log line, a probe" "$(warnings foreign) $probes" "1 8"
else
	t_skipped "foreign-owned file (needs root to chown)"
fi

# --- 6. a directory others may write: nothing read, nothing written ----------
chmod 0777 "${cache%/*}"
rm -f "$cache"
before=$probes
connect open-dir
t_check "open directory: ignored" \
	grep -q "probe cache ${cache%/*}: accessible by group or others; ignored" "$t_tmp/open-dir.log"
t_eq "open directory: one log line, a probe" "$(warnings open-dir) $probes" "1 $((before + 1))"
t_check "open directory: no file written in it" test ! -e "$cache"

# --- 7. a cache on a disk (the /tmp fallback may be one): probes shared,
#        a ticket's secret never written there ----------------------------
if [ "$(fs_type "$t_tmp")" != tmpfs ] && [ "$(fs_type "$t_tmp")" != ramfs ]; then
	resumed_before=$(grep -c 'connected as server (resumed)' "$t_tmp/rockd.log")
	mkdir -m 700 "$t_tmp/disk"
	for p in disk1 disk2; do
		ROCK_PROBE_CACHE="$t_tmp/disk/probes" ROCK_LOG="$t_tmp/$p.log" ROCK_DEBUG=1 \
			"$ROCK" "$TRAFFIC" connect 127.0.0.1 "$port" 1 >"$t_tmp/$p.out" 2>&1 ||
			echo "rc=$?" >>"$t_tmp/$p.out"
		n=$((n + 1))
		for _ in $(seq 100); do
			[ "$(grep -c 'client connected, backend' "$t_tmp/rockd.log")" -ge "$n" ] && break
			sleep 0.02
		done
	done
	t_eq "a cache on disk: the second process's probe is shared" \
		"$(grep -c 'a rockd, by the shared probe cache' "$t_tmp/disk2.log")" 1
	t_eq "a cache on disk: no ticket in it, no resumption" \
		"$(grep -c 'connected as server (resumed)' "$t_tmp/rockd.log")" "$resumed_before"
else
	t_skipped "a cache on disk (the scratch directory is in memory)"
fi

for f in "$t_tmp"/*.out; do
	if grep -q '^rc=' "$f"; then t_bad "client $(basename "$f" .out) failed: $(cat "$f")"; fi
done
t_done
