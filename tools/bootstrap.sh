#!/bin/sh
# bootstrap.sh: install the Debian packages rocks needs, build it, then run the demo or the tests.
set -eu
usage() { echo "usage: sh tools/bootstrap.sh demo [PROFILE] | check | deps" >&2; exit 2; }
[ $# -ge 1 ] || usage
case $1 in demo) [ $# -le 2 ] || usage ;; check|deps) [ $# -eq 1 ] || usage ;; *) usage ;; esac
cd "$(dirname "$0")/.."

# Build tools, the libraries (libsodium, libevent, Check; libnetfilter_queue
# for the tests' netem on kernels without one), and what the tests drive:
# socat, iproute2/iptables for network namespaces, ping, the real programs
# run under rock (python3, curl, a JDK), ssh and tmux, git and rsync
# (rock ssh as their transport); clang and its
# libFuzzer and sanitizer runtimes for the fuzz harnesses (tests/fuzz);
# systemd for systemd-analyze, which checks rockd's unit (and man-db:
# its verify opens the unit's man page with man); groff-base
# to check that the man pages render; libcap2-bin for setcap (rock's
# warning for a program with file capabilities); haproxy, the balancer in
# front of a fleet of rockd (tests/netns/rockd-fleet.sh).
PACKAGES="build-essential autoconf automake libtool pkg-config
libsodium-dev libevent-dev check libnetfilter-queue-dev
clang libclang-rt-14-dev
socat iproute2 iptables iputils-ping procps psmisc libcap2-bin python3 curl
default-jdk-headless openssh-server openssh-client tmux git rsync systemd man-db groff-base
haproxy"

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"
	elif command -v sudo >/dev/null; then sudo "$@"
	else echo "bootstrap: run me as root (apt-get needs it)" >&2; exit 1; fi
}

echo "== installing packages"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
[ "$1" = deps ] && exit 0

echo "== building"
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
./configure -q --enable-werror
make -s -j"$(nproc)"

# run_check DIR: make check in DIR; print the failing logs if it fails.
total_pass=0 total_fail=0 total_skip=0
run_check() {
	if ! make -s -C "$1" -j"$(nproc)" check; then
		cat "$1/test-suite.log"
		exit 1
	fi
	p=$(sed -n 's/^# PASS: *//p' "$1/test-suite.log")
	f=$(sed -n 's/^# FAIL: *//p' "$1/test-suite.log")
	s=$(sed -n 's/^# SKIP: *//p' "$1/test-suite.log")
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
	grep -h '^SKIP: ' "$1"/tests/*.log "$1"/tests/*/*.log 2>/dev/null | sort | uniq -c || true
}

case $1 in
demo)
	# The demo is a bash script (arrays, the harness): never sh, which is
	# dash on Debian.
	exec bash tools/demo.sh ${2:+"$2"}
	;;
check)
	echo "== make check"
	run_check .
	# distcheck builds the tarball in a fresh tree: there the build and
	# make check run with AddressSanitizer and UndefinedBehaviorSanitizer.
	echo "== make distcheck, built with ASan and UBSan"
	# The fuzz harnesses are clang's build either way, and had their
	# 20 s each in make check: in distcheck a few seconds show they
	# build and run from the tarball.
	if ! ROCK_FUZZ_SECONDS=${ROCK_FUZZ_SECONDS:-5} make -s distcheck \
	    DISTCHECK_CONFIGURE_FLAGS="--enable-sanitizers --enable-werror"; then
		cat rocks-*/_build/sub/test-suite.log 2>/dev/null
		exit 1
	fi
	total_pass=$((total_pass * 2)) total_fail=$((total_fail * 2)) total_skip=$((total_skip * 2))
	echo "tests: $total_pass passed, $total_fail failed, $total_skip skipped"
	;;
esac
