#!/usr/bin/env bash
# proxy-bench.sh: rockd against the proxy a user would run instead (Debian's HAProxy, TCP mode): connect, first echo, request/response at many connections, download, the proxies' CPU per connect and the client's system calls per connect; prints a table with ratios to HAProxy, never a verdict.
#
# Usage: proxy-bench.sh [ROUNDS] [CONNS]   (defaults 2 and 2000; root to
# install HAProxy when it is missing, else any user; a few minutes)
#
# Columns, the same client program each time, on loopback:
#   raw      straight to the backend
#   haproxy  through HAProxy (mode tcp, nbthread PB_THREADS, default 1)
#   plain    through rockd's plain relay (an ordinary TCP client), rockd
#            with PB_WORKERS workers (default: PB_THREADS), spread
#            PB_SPREAD (address, rockd's default, or connection)
#   rock     the same client under tools/rock, through rockd (a rock)
# Backends: rock-bench's echo and source, tests/echod (request/response).
# One HAProxy and one rockd front all three for the whole run.
#
# Rows, each the median over ROUNDS, the column order alternating from
# round to round, after one warm-up of each:
#   connect us        300 connects in one process (rock-bench connect plain:
#                     socket() + connect(), then close())
#   first echo us     300 connections, each timed from socket() to its first
#                     64-byte echo (rock-bench first)
#   proxy CPU us      the proxy's time on a CPU (the scheduler's count,
#                     /proc/PID/task/*/schedstat) per connect and close
#                     over those 600, 0 for raw (rockd's: its master's
#                     and every worker's)
#   client CPU us     the client process's, per connect (bash's time)
#   req/resp /s       CONNS connections, 64-byte request/response rounds for
#                     PB_SECONDS (2) (write-bench-epoll, as relay-bench.sh)
#   download MB/s     64 KiB blocks from the source, PB_MB (200) MB
# Then, once: the client's system calls per connect and close, raw and
# rock: counted by the kernel (perf stat, raw_syscalls:sys_enter, 1,000
# connects less 1), the figure the target is read on; and by strace -f -c
# (100 less 1), whose stop at every call stretches each thread's hold of
# librock's lock and so adds futex calls a run without it does not make.
# The last column is each figure over HAProxy's, with the issue's target
# beside the rows it names ("met" or "NOT MET": a label, not a verdict).
#
# Environment: BUILDDIR (default two levels above), PB_THREADS, PB_WORKERS, PB_SPREAD, PB_SECONDS,
# PB_MB, HAPROXY (path). Exit status 0 unless something failed to run.

set -u

me=proxy-bench.sh
rounds=${1:-2}
conns=${2:-2000}
secs=${PB_SECONDS:-2}
mb=${PB_MB:-200}
threads=${PB_THREADS:-1}
workers=${PB_WORKERS:-$threads}
spread=${PB_SPREAD:-address}
case "$rounds$conns$threads$workers" in *[!0-9]*) echo "usage: $me [ROUNDS] [CONNS]" >&2; exit 2 ;; esac

# shellcheck source=bench-lib.sh
. "$(dirname -- "$0")/bench-lib.sh"
bench_programs

haproxy=${HAPROXY:-$(command -v haproxy)}
if [ -z "$haproxy" ]; then
	[ "$(id -u)" -eq 0 ] || die "haproxy not installed (apt-get install haproxy, as root)"
	echo "$me: installing Debian's haproxy (a bench dependency)" >&2
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy; } \
		>"$tmp/apt.log" 2>&1 || die "apt-get install haproxy failed: $(tail -n 3 "$tmp/apt.log")"
	haproxy=$(command -v haproxy) || die "haproxy installed but not found"
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null
[ "$(ulimit -n)" -ge $((4 * conns + 256)) ] ||
	die "$((4 * conns + 256)) descriptors needed, the limit is $(ulimit -n)"

freeport() { "$bench" freeport | awk '{ print $2 }'; }
start_backend echo echo
echo_port=$backend_port
start_backend source source
source_port=$backend_port
echod_port=$(freeport)
"$echod" "$echod_port" 2>"$tmp/echod.log" &
pids+=($!)

declare -A port
port[raw:echo]=$echo_port port[raw:source]=$source_port port[raw:echod]=$echod_port
for k in haproxy plain; do
	for s in echo source echod; do
		port[$k:$s]=$(freeport)
	done
done
for s in echo source echod; do port[rock:$s]=${port[plain:$s]}; done

cat >"$tmp/haproxy.cfg" <<EOF
global
	nbthread $threads
	maxconn $((2 * conns + 1000))
defaults
	mode tcp
	timeout connect 5s
	timeout client 60s
	timeout server 60s
listen echo
	bind 127.0.0.1:${port[haproxy:echo]}
	server s 127.0.0.1:$echo_port
listen source
	bind 127.0.0.1:${port[haproxy:source]}
	server s 127.0.0.1:$source_port
listen echod
	bind 127.0.0.1:${port[haproxy:echod]}
	server s 127.0.0.1:$echod_port
EOF
"$haproxy" -c -q -f "$tmp/haproxy.cfg" >"$tmp/haproxy-check.log" 2>&1 ||
	die "haproxy -c refused the configuration: $(tail -n 3 "$tmp/haproxy-check.log")"
"$haproxy" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
haproxy_pid=$!
pids+=("$haproxy_pid")
"$rockd" -F --listen "127.0.0.1:${port[plain:echo]}" --backend "127.0.0.1:$echo_port" \
	--listen "127.0.0.1:${port[plain:source]}" --backend "127.0.0.1:$source_port" \
	--listen "127.0.0.1:${port[plain:echod]}" --backend "127.0.0.1:$echod_port" \
	--workers "$workers" --spread "$spread" 2>"$tmp/rockd.log" &
rockd_pid=$!
pids+=("$rockd_pid")
for k in haproxy plain; do
	for ((i = 0; i < 100; i++)); do
		"$bench" connect plain 127.0.0.1 "${port[$k:echod]}" 1 >/dev/null 2>&1 && break
		sleep 0.05
	done
	((i < 100)) || die "$k did not start: $(tail -n 3 "$tmp/rockd.log" "$tmp/haproxy.log")"
done
# The proxy's time on a CPU, ns, all its threads (the scheduler's own
# count: /proc ticks, 10 ms each, made 600 connects 5 to 16 ticks).
# PIDS (comma-separated): their sum.
cpu_ns() {
	local p
	for p in ${1//,/ }; do cat /proc/"$p"/task/*/schedstat; done |
		awk '{ t += $1 } END { printf "%.0f", t }'
}
# rockd's master and workers, comma-separated (perf stat -p takes that)
rockd_pids() { echo "$rockd_pid$(pgrep -P "$rockd_pid" -d, rockd | sed 's/^/,/')"; }
proxy_pid() { case $1 in haproxy) echo "$haproxy_pid" ;; plain | rock) rockd_pids ;; *) echo "" ;; esac; }

# client KIND COMMAND...: the command, under tools/rock for rock; its
# output on stdout, its CPU seconds (user + system) in $tmp/cpu
client() {
	local k=$1
	shift
	local -a pre=()
	[ "$k" = rock ] && pre=("$wrapper")
	local TIMEFORMAT='%3U %3S'
	{ time "${pre[@]}" "$@" 2>>"$tmp/client.err"; } 2>"$tmp/time" ||
		die "$k: $* failed: $(tail -n 2 "$tmp/client.err")"
	awk '{ print $1 + $2 }' "$tmp/time" >"$tmp/cpu"
}

# run KIND: "CONNECT_US FIRST_US PROXY_CPU_US CLIENT_CPU_US TRIPS_S MB_S"
run() {
	local k=$1 pp c f t0 t1 pcpu ccpu trips dl line
	pp=$(proxy_pid "$k")
	[ -n "$pp" ] && t0=$(cpu_ns "$pp")
	c=$(client "$k" "$bench" connect plain 127.0.0.1 "${port[$k:echo]}" 300 | awk '{ print $4 }')
	ccpu=$(cat "$tmp/cpu")
	f=$(client "$k" "$bench" first 127.0.0.1 "${port[$k:echo]}" 300 | awk '{ print $3 }')
	ccpu=$(awk -v a="$ccpu" -v b="$(cat "$tmp/cpu")" 'BEGIN { print (a + b) * 1e6 / 600 }')
	pcpu=0
	if [ -n "$pp" ]; then
		t1=$(cpu_ns "$pp")
		pcpu=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e3 / 600 }')
	fi
	line=$(client "$k" "$epollc" 127.0.0.1 "${port[$k:echod]}" "$conns" "$secs" | grep '^epoll')
	trips=$(awk -v secs="$secs" '{ printf "%.0f", $9 / secs }' <<<"$line")
	dl=$(client "$k" "$bench" download plain 127.0.0.1 "${port[$k:source]}" 65536 \
		$((mb * 1000000)) | awk '{ print $5 }')
	echo "$c $f $pcpu $ccpu $trips $dl"
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

kinds=(raw haproxy plain rock)
declare -A fig
for k in "${kinds[@]}"; do run "$k" >/dev/null; done
for ((r = 1; r <= rounds; r++)); do
	order=("${kinds[@]}")
	((r % 2 == 0)) && order=(rock plain haproxy raw)
	for k in "${order[@]}"; do
		read -r c f p cc t d <<<"$(run "$k")"
		echo "round $r/$rounds $k: connect $c us, first echo $f us, proxy $p us and client $cc us CPU per connect, $t trips/s, $d MB/s" >&2
		fig[$k:c]+=" $c" fig[$k:f]+=" $f" fig[$k:p]+=" $p" fig[$k:cc]+=" $cc" fig[$k:t]+=" $t" fig[$k:d]+=" $d"
	done
done

# perf_syscalls KIND: the same, counted by the kernel (no stops)
perf_syscalls() {
	local k=$1 n
	local -a pre=() c=()
	[ "$k" = rock ] && pre=("$wrapper")
	for n in 1 1001; do
		c+=("$(perf stat -x, -e raw_syscalls:sys_enter -- "${pre[@]}" "$bench" connect plain \
			127.0.0.1 "${port[$k:echo]}" "$n" 2>&1 >/dev/null |
			awk -F, '/sys_enter/ { print $1 }')")
	done
	[ -n "${c[0]}" ] && [ -n "${c[1]}" ] || return 1
	awk -v a="${c[0]}" -v b="${c[1]}" 'BEGIN { printf "%.1f", (b - a) / 1000 }'
}

# syscalls KIND: the client's system calls per connect and close
syscalls() {
	local k=$1 n a b
	local -a pre=()
	[ "$k" = rock ] && pre=("$wrapper")
	for n in 1 101; do
		strace -f -c -o "$tmp/strace.$n" "${pre[@]}" "$bench" connect plain 127.0.0.1 \
			"${port[$k:echo]}" "$n" >/dev/null 2>>"$tmp/client.err" || return 1
	done
	# "% time, seconds, usecs/call, calls, [errors,] total"
	a=$(awk '$NF == "total" { print $4 }' "$tmp/strace.1")
	b=$(awk '$NF == "total" { print $4 }' "$tmp/strace.101")
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 100 }'
}

# proxy_syscalls KIND: the proxy's system calls per connect and close of
# that kind's client, counted by the kernel over 1,000
proxy_syscalls() {
	local k=$1 pp ps
	local -a pre=()
	pp=$(proxy_pid "$k")
	[ "$k" = rock ] && pre=("$wrapper")
	perf stat -x, -e raw_syscalls:sys_enter -p "$pp" -o "$tmp/proxy-perf" -- sleep 60 2>/dev/null &
	ps=$!
	sleep 0.5
	"${pre[@]}" "$bench" connect plain 127.0.0.1 "${port[$k:echo]}" 1000 >/dev/null 2>>"$tmp/client.err"
	sleep 1
	# perf stat ends with its command; a signal to perf itself is
	# taken only once the 60 s are up
	pkill -P "$ps" -x sleep
	wait "$ps"
	awk -F, '/sys_enter/ { printf "%.1f", $1 / 1000 }' "$tmp/proxy-perf"
}

echo "$me: loopback; HAProxy $("$haproxy" -v | awk 'NR == 1 { print $3 }') nbthread $threads, rockd workers $workers (spread $spread);" \
	"medians of $rounds rounds; ratio: over HAProxy"
printf '%-16s %10s %10s %10s %10s %9s %9s  %s\n' "" raw haproxy plain rock "plain/hp" "rock/hp" target
# row NAME KEY FORMAT [WHO OP LIMIT]: medians per column, plain and rock
# over HAProxy, and the target's label (WHO: rock, or both plain and rock)
row() {
	local name=$1 key=$2 fmt=$3 who=${4:-} op=${5:-} lim=${6:-} v k
	local -a m=()
	for k in "${kinds[@]}"; do
		# shellcheck disable=SC2086 # space-separated numbers
		v=$(median ${fig[$k:$key]})
		m+=("$v")
	done
	awk -v n="$name" -v fmt="$fmt" -v a="${m[0]}" -v h="${m[1]}" -v p="${m[2]}" \
	    -v r="${m[3]}" -v who="$who" -v op="$op" -v lim="$lim" '
	function meets(x) { return op == ">=" ? x >= lim : x <= lim }
	BEGIN {
		pr = h > 0 ? p / h : 0; rr = h > 0 ? r / h : 0
		lab = ""
		if (who != "")
			lab = sprintf("%s %s %s: %s", who, op, lim, meets(rr) &&
			    (who != "both" || meets(pr)) ? "met" : "NOT MET")
		printf "%-16s " fmt " " fmt " " fmt " " fmt " %9.2f %9.2f  %s\n", n, a, h, p, r, pr, rr, lab
	}'
}
row "connect us" c "%10.1f" rock "<=" 2
row "first echo us" f "%10.1f" rock "<=" 1.3
row "proxy CPU us" p "%10.1f" rock "<=" 1.5
row "client CPU us" cc "%10.1f"
row "req/resp /s" t "%10.0f" both ">=" 1
row "download MB/s" d "%10.1f" both ">=" 1
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
	pr=$(perf_syscalls rock)
	awk -v r="$(perf_syscalls raw)" -v k="$pr" 'BEGIN { printf "client system calls per connect and close (perf stat): raw %s, rock %s (target: rock <= 40: %s)\n", r, k, k + 0 <= 40 ? "met" : "NOT MET" }'
	echo "proxy system calls per connect and close (perf stat): haproxy $(proxy_syscalls haproxy)," \
		"rockd plain $(proxy_syscalls plain), rockd rock $(proxy_syscalls rock)"
else
	echo "perf (linux-perf) not usable here: system calls not counted by the kernel"
fi
if command -v strace >/dev/null; then
	echo "client system calls per connect and close (strace -f -c): raw $(syscalls raw), rock $(syscalls rock)"
else
	echo "strace not installed: system calls not counted by strace"
fi
echo "$conns connections for req/resp, ${secs} s a run; proxy CPU: /proc/PID/task/*/schedstat over 600 connects; client CPU: bash time"
exit 0
