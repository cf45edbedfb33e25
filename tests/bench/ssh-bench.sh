#!/usr/bin/env bash
# ssh-bench.sh: what `rock ssh` costs against plain ssh on real path profiles: the first contact, `ssh host true` after it, and ten successive git ls-remote calls over it (a script's transport); prints ratios measured in the same run, never a verdict.
#
# Usage (as root, from the build tree): tests/bench/ssh-bench.sh [ROUNDS]
#   ROUNDS     runs of each kind per profile (default 5); plain and rock
#              alternate which goes first from one round to the next
#   PROFILES   path profiles (default "lan wan rtt200 cellular";
#              tests/netns/profiles.sh), and rttN: N ms of round trip
#              and nothing else (the issue's "200 ms path")
#
# The server namespace runs an sshd of the bench's own on port 22 and has
# the build's rockd in the user's PATH, as an installed rockd would be; the
# server keeps the kernel's TCP Fast Open default, as a server whose
# administrator changed nothing does. The client's ssh_config is a user's
# (key authentication, known hosts), without ControlMaster, which would
# hide every login after the first. Rows:
#   first contact  rock ssh HOST true with nothing remembered (a new
#                  runtime directory: no session rockd, no probe cache),
#                  against plain ssh HOST true
#   ssh HOST true  after the first contact: the rock ssh that finds its
#                  session rockd again
#   10 x git ls-remote   GIT_SSH_COMMAND="rock ssh" against plain ssh: the
#                  total of ten calls one after the other (a script)
# Figures are medians of ROUNDS runs in ms; ratios are rock/plain.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$(cd "$here/../.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
export top_builddir top_srcdir
# shellcheck source=../netns/rock-lib.sh
. "$top_srcdir/tests/netns/rock-lib.sh"
# shellcheck source=../netns/ssh-lib.sh
. "$top_srcdir/tests/netns/ssh-lib.sh"
rounds=${1:-5}
case $rounds in '' | *[!0-9]* | 0*) echo "usage: $0 [ROUNDS]" >&2; exit 2 ;; esac
[ -x "$ROCKD" ] && [ -x "$ROCK" ] || { echo "build first: make" >&2; exit 1; }
ssh_require git

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
ms_now() { echo $(($(date +%s%N) / 1000000)); }

# KIND RUNDIR CMD...: CMD (an ssh command line, "ssh" first) plain, or as
# rock ssh (KIND rock) with RUNDIR as the user's runtime directory, in the
# client namespace; prints the milliseconds it took; fails if CMD does.
timed() {
	local kind=$1 run=$2 t0 t1
	shift 2
	t0=$(ms_now)
	if [ "$kind" = rock ]; then
		XDG_RUNTIME_DIR=$run ROCK_KNOWN_SERVERS="$t_tmp/known_servers" \
			t_foreign nn_c "$ROCK" "$@" >/dev/null 2>>"$t_tmp/rock.err" || return 1
	else
		nn_c "$@" >/dev/null 2>>"$t_tmp/plain.err" || return 1
	fi
	t1=$(ms_now)
	echo $((t1 - t0))
}

# KIND RUNDIR: ten git ls-remote calls over KIND's ssh; the total in ms.
git_ten() {
	local kind=$1 run=$2 t0 i via="ssh -F $t_tmp/ssh_config"
	[ "$kind" = plain ] || via="$ROCK $via"
	t0=$(ms_now)
	for ((i = 0; i < 10; i++)); do
		XDG_RUNTIME_DIR=$run ROCK_KNOWN_SERVERS="$t_tmp/known_servers" GIT_SSH_COMMAND=$via \
			t_foreign nn_c git ls-remote "root@$NN_S_ADDR:$t_tmp/repo.git" >/dev/null \
			2>>"$t_tmp/$kind.err" || return 1
	done
	echo $(($(ms_now) - t0))
}

bench_profile() {
	local p=$1 r k first order host delay=
	case $p in rtt[0-9]*) delay=$((${p#rtt} / 2)) p=lan ;; esac
	local -a fp=() fr=() tp=() tr=() gp=() gr=() rf=() rt=() rg=()
	export NN_PROFILE=$p
	# Each profile from nothing: keys, known hosts, runtime directories.
	rm -rf "$t_tmp"
	mkdir -p "$t_tmp"
	rock_netns_up
	if [ -n "$delay" ]; then
		nn_netem both delay "${delay}ms" || return 1
		p="rtt$((delay * 2))"
	fi
	sshd_up "PermitUserEnvironment yes"
	ssh_rockd_in_path
	nn_wait_port "$NN_S" 127.0.0.1 22 5 || return 1
	git init -q --bare "$t_tmp/repo.git" && git -C "$t_tmp/repo.git" symbolic-ref HEAD refs/heads/main
	ssh_user_config
	host="root@$NN_S_ADDR"
	if [ -n "$delay" ]; then
		echo "== $p: round trip $((delay * 2)) ms; netem each way: delay ${delay}ms"
	else
		echo "== $p: round trip $(nn_profile_rtt_ms "$p") ms; netem each way: $(nn_profile_netem "$(nn_profile_base "$p")")"
	fi
	# The host key learnt once, outside the figures.
	timed plain - ssh -F "$t_tmp/ssh_config" "$host" true >/dev/null || return 1
	mkdir -m 700 -p "$t_tmp/run"
	for ((r = 1; r <= rounds; r++)); do
		order="plain rock"
		[ $((r % 2)) -eq 1 ] || order="rock plain"
		for k in $order; do
			if [ "$k" = plain ]; then
				fp+=("$(timed plain - ssh -F "$t_tmp/ssh_config" "$host" true)") || return 1
			else
				first="$t_tmp/first$r"
				mkdir -m 700 "$first"
				fr+=("$(timed rock "$first" ssh -F "$t_tmp/ssh_config" "$host" true)") || return 1
			fi
		done
		rf+=("$(ratio "${fr[-1]}" "${fp[-1]}")")
	done
	# The runtime directory that the next rows share: a first contact.
	timed rock "$t_tmp/run" ssh -F "$t_tmp/ssh_config" "$host" true >/dev/null || return 1
	for ((r = 1; r <= rounds; r++)); do
		order="plain rock"
		[ $((r % 2)) -eq 1 ] || order="rock plain"
		for k in $order; do
			if [ "$k" = plain ]; then
				tp+=("$(timed plain - ssh -F "$t_tmp/ssh_config" "$host" true)") || return 1
			else
				tr+=("$(timed rock "$t_tmp/run" ssh -F "$t_tmp/ssh_config" "$host" true)") || return 1
			fi
		done
		rt+=("$(ratio "${tr[-1]}" "${tp[-1]}")")
	done
	for ((r = 1; r <= rounds; r++)); do
		order="plain rock"
		[ $((r % 2)) -eq 1 ] || order="rock plain"
		for k in $order; do
			if [ "$k" = plain ]; then gp+=("$(git_ten plain -)") || return 1
			else gr+=("$(git_ten rock "$t_tmp/run")") || return 1; fi
		done
		rg+=("$(ratio "${gr[-1]}" "${gp[-1]}")")
	done
	printf '   %-22s plain %8s ms  rock %8s ms  rock/plain %s\n' \
		"first contact" "$(median "${fp[@]}")" "$(median "${fr[@]}")" "$(median "${rf[@]}")" \
		"ssh HOST true" "$(median "${tp[@]}")" "$(median "${tr[@]}")" "$(median "${rt[@]}")" \
		"10 x git ls-remote" "$(median "${gp[@]}")" "$(median "${gr[@]}")" "$(median "${rg[@]}")"
	echo "   ($rounds rounds; per round: first contact ${rf[*]}; ssh true ${rt[*]}; git ${rg[*]})"
	if [ -s "$t_tmp/rock.err" ]; then
		echo "   rock ssh said:"
		sort "$t_tmp/rock.err" | uniq -c | head -5 | sed 's/^/     /'
	fi
	stop_pids
	nn_cleanup
}

nn_require_root
for p in ${PROFILES:-lan wan rtt200 cellular}; do
	NN_ID=rsb$$$p
	NN_ID=${NN_ID//[^a-z0-9]/}
	bench_profile "$p" || echo "   $p: could not set up or a run failed: $(tail -n 3 "$t_tmp"/*.err 2>/dev/null)"
done
