#!/usr/bin/env bash
# rockd-metrics.sh: rockd's metrics endpoint on loopback, rockd with its default workers (one per CPU): counters that move with rocks and relays, summed over the workers, 404, the connection cap, bad config, SIGHUP and SIGUSR2.
set -u
. "$(dirname "$0")/lib.sh"
ROCKD="$top_builddir/daemon/rockd"
ROCKCAT="$top_builddir/tools/rockcat"
ECHOD="$top_builddir/tests/echod"
t_kill_on_exit
command -v python3 >/dev/null || t_skip_all "python3 not found"
command -v curl >/dev/null || t_skip_all "curl not found"


# fetch [PATH]: the body, or nothing; http_code and content_type set.
fetch() {
	local out
	out=$(t_foreign curl -s --max-time 5 -o "$t_tmp/body" \
		-w '%{http_code} %{content_type}' "http://127.0.0.1:$mport${1:-/metrics}")
	http_code=${out%% *} content_type=${out#* }
	cat "$t_tmp/body" 2>/dev/null
}

# msum 'NAME{LABELS}' (the labels but worker) <METRICS: the sum over the
# workers' samples; nothing if there is none. rockd runs one worker per
# CPU; a worker other than the endpoint's publishes every 500 ms.
msum() {
	awk -v k="$1" '!/^#/ { key = $1; gsub(/worker="[0-9]+",?/, "", key)
		sub(/,\}/, "}", key); sub(/\{\}/, "", key)
		if (key == k) { s += $2; n++ } } END { if (n) print s }'
}

# metric 'NAME{LABELS}': its value now.
metric() {
	fetch | msum "$1"
}

# until_metric 'NAME{LABELS}' VALUE SECONDS: waits for it; prints the last.
until_metric() {
	local i v=
	for i in $(seq $(($3 * 20))); do
		v=$(metric "$1")
		[ "$v" = "$2" ] && break
		sleep 0.05
	done
	echo "$v"
}

# --- 1. bad values: exit 2 naming the file, line and problem ---------------
port=$(free_port) be=$(free_port) mport=$(free_port)
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\nmetrics nonsense\n' "$port" "$be" >"$t_tmp/bad.conf"
"$ROCKD" -t -f "$t_tmp/bad.conf" >/dev/null 2>"$t_tmp/bad.err"
t_eq "metrics nonsense: rockd -t exits 2" $? 2
t_eq "metrics nonsense: file, line and problem" "$(cat "$t_tmp/bad.err")" \
	"rockd: $t_tmp/bad.conf:2: metrics \"nonsense\": expected ADDR:PORT (127.0.0.1:9187, say)"
"$ROCKD" -t --listen "127.0.0.1:$port" --backend "127.0.0.1:$be" \
	--metrics "127.0.0.1:$port" >/dev/null 2>"$t_tmp/bad.err"
t_eq "--metrics on a service's port: exits 2" $? 2
t_eq "--metrics on a service's port: says so" "$(cat "$t_tmp/bad.err")" \
	"rockd: --metrics \"127.0.0.1:$port\": the same port as the service on \"127.0.0.1:$port\""

# --- 2. rockd with an echo backend and metrics on 127.0.0.1 -----------------
"$ECHOD" "$be" 2>/dev/null &
pids+=($!)
printf 'listen 127.0.0.1:%s backend 127.0.0.1:%s\nmetrics 127.0.0.1:%s\n' \
	"$port" "$be" "$mport" >"$t_tmp/rockd.conf"
"$ROCKD" -F -p "$t_tmp/rockd.pid" -f "$t_tmp/rockd.conf" 2>"$t_tmp/rockd.log" &
rockd_pid=$!
pids+=("$rockd_pid")
for _ in $(seq 100); do listening "$mport" && listening "$be" && break; sleep 0.05; done
listening "$mport" || t_fail_all "rockd did not start (see $t_tmp/rockd.log)"

fetch >"$t_tmp/m0"
t_eq "GET /metrics: 200" "$http_code" 200
t_eq "GET /metrics: the 0.0.4 text format" "$content_type" "text/plain; version=0.0.4; charset=utf-8"
# Each sample's family is typed and described before it, once.
families() {
	awk '/^# HELP / { help[$3] = 1; next }
	    /^# TYPE / { if ($3 in type || !($3 in help)) bad = 1; type[$3] = 1; n++; next }
	    { name = $1; sub(/\{.*/, "", name); if (!(name in type) || $1 !~ /worker="[0-9]+"/) bad = 1 }
	    END { print bad ? "bad" : n }' "$1"
}
t_eq "18 families, each with HELP and TYPE, every sample with its worker" "$(families "$t_tmp/m0")" 18
# (rockd counts its affinity; nproc would heed OMP_NUM_THREADS too)
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
[ "$cpus" -le 64 ] || cpus=64
t_eq "no workers line: one worker per CPU ($cpus), each with its samples" \
	"$(grep -o 'worker="[0-9]*"' "$t_tmp/m0" | sort -u | wc -l)" "$cpus"
t_eq "at start: no session connected" "$(msum "rockd_sessions{state=\"connected\"}" <"$t_tmp/m0")" 0
fetch /other >/dev/null
t_eq "another path: 404" "$http_code" 404

# --- 3. two rocks: the gauge goes to 2, the bytes move by what was sent -----
start=$(fetch)
at_start() { echo "$start" | msum "$1"; }
b0=$(at_start "rockd_rock_bytes_total{direction=\"to_backend\"}")
c0=$(at_start "rockd_rock_bytes_total{direction=\"to_client\"}")
mkfifo "$t_tmp/in1" "$t_tmp/in2"
"$ROCKCAT" -r 127.0.0.1 "$port" <"$t_tmp/in1" >"$t_tmp/out1" 2>"$t_tmp/err1" &
cat1=$!
"$ROCKCAT" -r 127.0.0.1 "$port" <"$t_tmp/in2" >"$t_tmp/out2" 2>"$t_tmp/err2" &
cat2=$!
pids+=("$cat1" "$cat2")
exec 3>"$t_tmp/in1" 4>"$t_tmp/in2"
head -c 10000 /dev/urandom >"$t_tmp/p1"
head -c 23456 /dev/urandom >"$t_tmp/p2"
cat "$t_tmp/p1" >&3
cat "$t_tmp/p2" >&4
for _ in $(seq 200); do
	[ "$(stat -c %s "$t_tmp/out1")" = 10000 ] && [ "$(stat -c %s "$t_tmp/out2")" = 23456 ] && break
	sleep 0.05
done
t_check "two rocks: both echoed whole" cmp -s "$t_tmp/p1" "$t_tmp/out1"
t_check "two rocks: both echoed whole (second)" cmp -s "$t_tmp/p2" "$t_tmp/out2"
t_eq "two rocks: sessions connected" "$(until_metric "rockd_sessions{state=\"connected\"}" 2 5)" 2
t_eq "two rocks: sessions suspended" "$(until_metric "rockd_sessions{state=\"suspended\"}" 0 5)" 0
t_eq "two rocks: handshakes completed" "$(until_metric "rockd_handshakes_total" 2 5)" 2
t_eq "two rocks: bytes to the backend" \
	"$(until_metric "rockd_rock_bytes_total{direction=\"to_backend\"}" $((b0 + 33456)) 5)" $((b0 + 33456))
t_eq "two rocks: bytes to the clients" \
	"$(until_metric "rockd_rock_bytes_total{direction=\"to_client\"}" $((c0 + 33456)) 5)" $((c0 + 33456))
t_eq "two rocks: their rings empty once the clients consumed" \
	"$(until_metric "rockd_ring_bytes" 0 5)" 0

exec 3>&- 4>&-
wait "$cat1"
t_eq "first rock ends cleanly" $? 0
wait "$cat2"
t_eq "second rock ends cleanly" $? 0
t_eq "closed: sessions connected back to 0" \
	"$(until_metric "rockd_sessions{state=\"connected\"}" 0 5)" 0
t_eq "closed: no handshake failed" \
	"$(fetch | awk '/^rockd_handshake_failures_total/ { n += $2 } END { print n }')" 0

# --- 4. a plain client: a relay, and its bytes each way --------------------
exec 5<>"/dev/tcp/127.0.0.1/$port"
printf 'hello' >&5
read -r -N 5 -t 5 reply <&5
t_eq "plain: echoed" "$reply" hello
t_eq "plain: one relay open" "$(until_metric "rockd_relays" 1 5)" 1
t_eq "plain: bytes to the backend" "$(until_metric "rockd_plain_bytes_total{direction=\"to_backend\"}" 5 5)" 5
t_eq "plain: bytes to the client" "$(until_metric "rockd_plain_bytes_total{direction=\"to_client\"}" 5 5)" 5
exec 5>&-
t_eq "plain: closed, no relay" "$(until_metric "rockd_relays" 0 5)" 0

# --- 5. a rock hello cut short counts as a failure, reason "closed" --------
exec 6<>"/dev/tcp/127.0.0.1/$port"
printf '\211ROCKS\r\n' >&6
sleep 0.2
exec 6>&-
t_eq "hello cut short: reason closed" \
	"$(until_metric "rockd_handshake_failures_total{reason=\"closed\"}" 1 5)" 1

# --- 6. at most 8 connections; a silent one is dropped after 5 s -----------
for fd in 10 11 12 13 14 15 16 17; do eval "exec $fd<>/dev/tcp/127.0.0.1/$mport"; done
for _ in $(seq 40); do fetch >/dev/null; [ "$http_code" = 503 ] && break; sleep 0.05; done
t_eq "a ninth connection: 503" "$http_code" 503
t0=$(date +%s%3N)
for _ in $(seq 160); do fetch >/dev/null; [ "$http_code" = 200 ] && break; sleep 0.05; done
t1=$(date +%s%3N)
t_eq "silent connections dropped: 200 again ($((t1 - t0)) ms later)" "$http_code" 200
for fd in 10 11 12 13 14 15 16 17; do eval "exec $fd>&-"; done

# --- 7. SIGHUP moves the endpoint ------------------------------------------
old=$mport mport=$(free_port)
sed -i "s/^metrics .*/metrics 127.0.0.1:$mport/" "$t_tmp/rockd.conf"
kill -HUP "$rockd_pid"
for _ in $(seq 100); do listening "$mport" && break; sleep 0.05; done
fetch >/dev/null
t_eq "reloaded: the new address answers" "$http_code" 200
t_check "reloaded: the old one is closed" bash -c "! ss -Htln 'sport = :$old' | grep -q ."

# --- 8. SIGUSR2: the successor takes the endpoint's socket over -----------
kill -USR2 "$rockd_pid"
wait "$rockd_pid"
t_eq "USR2: the old rockd exits once handed over" $? 0
# The successor writes the pid file once it holds everything.
for _ in $(seq 100); do
	next_pid=$(cat "$t_tmp/rockd.pid" 2>/dev/null)
	[ -n "$next_pid" ] && [ "$next_pid" != "$rockd_pid" ] && break
	sleep 0.05
done
pids+=("$next_pid")
t_check "USR2: the successor took the listener over" \
	grep -q "metrics on http://127.0.0.1:$mport/metrics (taken over)" "$t_tmp/rockd.log"
fetch >/dev/null
t_eq "USR2: the successor answers" "$http_code" 200
kill "$next_pid"
for _ in $(seq 100); do kill -0 "$next_pid" 2>/dev/null || break; sleep 0.05; done
t_check "the successor stops" bash -c "! kill -0 $next_pid 2>/dev/null"
t_eq "no sanitizer report in rockd's log" \
	"$(grep -c -e 'Sanitizer' -e 'runtime error' "$t_tmp/rockd.log")" 0
t_done
