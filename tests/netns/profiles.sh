# profiles.sh: the named network paths that tests, the demo and the benchmarks run on (sourced by netns.sh).
# shellcheck shell=bash
#
# A profile is netem options applied to each direction of the router (so a
# "100 ms RTT" profile delays 50 ms each way), through the kernel's netem or
# nfq-netem where the kernel has none. doc/paths.md explains them.
#
#   lan        no emulation (veth, ~0.05 ms)
#   dsl        20 ms RTT +-5 ms, 0.1 % loss, 20 Mbit/s
#   wan        100 ms RTT, 1 % loss
#   cellular   300 ms RTT +-80 ms, 3 % loss, 2 % reordered, 5 Mbit/s
#   satellite  600 ms RTT, 1 % loss, 10 Mbit/s
#   NAME+udp-blocked   NAME with UDP dropped both ways; udp-blocked alone is lan's
#
# Loss and reordering apply to each direction. A jitter is the standard
# deviation of a normal distribution, chosen so that nineteen round trips
# in twenty fall within the stated range.

NN_PROFILES="lan dsl wan cellular satellite"

# NAME: the netem options of each direction of base profile NAME ("" for
# none); status 2 for an unknown name.
nn_profile_netem() {
	case $1 in
	lan) echo "" ;;
	dsl) echo "delay 10ms 1800us distribution normal loss 0.1% rate 20mbit" ;;
	wan) echo "delay 50ms loss 1%" ;;
	cellular) echo "delay 150ms 29ms distribution normal loss 3% reorder 2% rate 5mbit" ;;
	satellite) echo "delay 300ms loss 1% rate 10mbit" ;;
	*) return 2 ;;
	esac
}

# PROFILE: its base name (without +udp-blocked; udp-blocked alone is lan).
nn_profile_base() {
	case $1 in
	udp-blocked) echo lan ;;
	*+udp-blocked) echo "${1%+udp-blocked}" ;;
	*) echo "$1" ;;
	esac
}

# PROFILE: the nominal round-trip time in ms.
nn_profile_rtt_ms() {
	case $(nn_profile_base "$1") in
	lan) echo 0 ;;
	dsl) echo 20 ;;
	wan) echo 100 ;;
	cellular) echo 300 ;;
	satellite) echo 600 ;;
	*) return 2 ;;
	esac
}

# PROFILE: put the namespaces' path (nn_setup done) on that profile,
# replacing the previous one.
nn_profile() {
	local base opts
	base=$(nn_profile_base "$1")
	if ! opts=$(nn_profile_netem "$base"); then
		nn_log "unknown path profile '$1' (one of: $NN_PROFILES, NAME+udp-blocked, udp-blocked)"
		return 2
	fi
	if [ -n "$opts" ]; then
		# shellcheck disable=SC2086 # the options are words
		nn_netem both $opts || return
	else
		nn_netem_clear both || return
	fi
	case $1 in
	*udp-blocked) nn_udp_block ;;
	*) nn_udp_unblock ;;
	esac
}
