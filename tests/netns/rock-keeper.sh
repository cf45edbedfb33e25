#!/usr/bin/env bash
# rock-keeper.sh: a program that writes 100 MiB into a rock and exits into a 30 s outage exits at once, and a detached keeper delivers every byte and the end of stream; with nothing in flight no keeper is left behind.
# shellcheck source-path=SCRIPTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=rock-lib.sh
. "$here/rock-lib.sh"
TRAFFIC="$top_builddir/tests/traffic"
[ -x "$ROCKD" ] && [ -x "$TRAFFIC" ] || t_skip_all "rockd or tests/traffic not built"
command -v socat >/dev/null || t_skip_all "socat not installed"
rock_netns_up

mib=${ROCK_KEEPER_MIB:-100}
outage=${ROCK_KEEPER_OUTAGE_S:-30}
# A path a little slower than loopback: 100 MiB take about 9 s.
for dev in "$NN_R_CIF" "$NN_R_SIF"; do
	nn_r tc qdisc replace dev "$dev" root tbf rate 100mbit burst 64kb latency 50ms ||
		t_skip_all "tbf not available"
done
"$TRAFFIC" pattern $((mib * 1048576)) >"$t_tmp/send.bin"
send_sum=$(sha256sum <"$t_tmp/send.bin")
# shellcheck disable=SC2317 # run by nn_cleanup
rm_bins() { rm -f "$t_tmp"/*.bin; }
nn_on_cleanup rm_bins
# The keepers the library logged starting ("keeper PID: finishing ..."); the
# harness kills what is left in the namespaces.
keeper_pids() { sed -n 's/.*keeper \([0-9][0-9]*\): finishing.*/\1/p' "$t_tmp"/*.rock.log 2>/dev/null | sort -u; }

# The backend: one connection, saved to a file; it exits at its end of file.
backend() {
	rm -f "$t_tmp/got.bin"
	nn_s socat -u TCP4-LISTEN:9000,bind=127.0.0.1,reuseaddr \
		"OPEN:$t_tmp/got.bin,creat,trunc" 2>"$t_tmp/backend.err" &
	backend_pid=$! pids+=($!)
	nn_wait_port "$NN_S" 127.0.0.1 9000 5 || t_skip_all "the backend did not start"
}
backend
nn_s "$ROCKD" -F -v --listen 7000 --backend 127.0.0.1:9000 2>"$t_tmp/rockd.log" &
pids+=($!)
nn_wait_port "$NN_S" "$NN_S_ADDR" 7000 20 || t_fail_all "rockd did not start"

# ---- 1. the path goes dark once the program has written everything
# traffic writes the pattern, says so, and closes and exits when told: the
# path goes dark in between, so its end of stream (and whatever TCP had
# not delivered yet) is owed into the outage.
ROCK_DEBUG=1 ROCK_LOG="$t_tmp/writer.rock.log" t_foreign nn_c "$ROCK" \
	"$TRAFFIC" write "$NN_S_ADDR" 7000 $((mib * 1048576)) "$t_tmp" 2>"$t_tmp/writer.err" &
wpid=$! pids+=($!)
wait_for 120 test -e "$t_tmp/written" || t_bad "the writer did not write $mib MiB in 2 minutes"
nn_blackhole both
dark_ms=$(now_ms)
nn_log "blackhole ${outage} s; the backend has $(stat -c %s "$t_tmp/got.bin") bytes"
touch "$t_tmp/go"
if wait_pid "$wpid" 5; then
	exited_ms=$(now_ms)
	t_eq "writer: exit status" "$waited" 0
	nn_log "the writer exited $((exited_ms - dark_ms)) ms into the outage"
	t_check "writer: exited within 2 s of the outage" [ $((exited_ms - dark_ms)) -lt 2000 ]
else
	t_bad "writer: still running 5 s into the outage"
fi
keepers=$(keeper_pids)
t_eq "one keeper finishes the rock" "$(echo "$keepers" | grep -c .)" 1
t_check "the keeper runs during the outage" kill -0 "$keepers"
# rock ls finds the keeper's rock at the keeper's own socket, as it found
# the program's (the program's is gone with it).
t_eq "rock ls: the keeper's rock, under its pid and the program's name" \
	"$("$ROCK" ls --json | grep -c "\"program\": \"keeper:traffic\", \"pid\": $keepers, \"role\": \"client\"")" 1
t_eq "rock ls: no other process's rock" "$("$ROCK" ls --json | grep -c '"source": "process"')" 1
nap "$outage"
t_check "backend: no end of file during the outage" kill -0 "$backend_pid"
nn_restore
if wait_pid "$backend_pid" 120; then
	t_eq "backend: got its end of file (exit status)" "$waited" 0
	nn_log "the backend's end of file came $(($(now_ms) - NN_V4_MS)) ms after the path came back"
else
	t_bad "backend: no end of file 2 minutes after the outage"
fi
t_eq "backend: $mib MiB, sha256 matches" "$(sha256sum <"$t_tmp/got.bin")" "$send_sum"
nn_log "delivered $(stat -c %s "$t_tmp/got.bin") of $((mib * 1048576)) bytes"
t_check "the keeper exited" wait_for 10 eval '! kill -0 $keepers 2>/dev/null'
t_check "the keeper removed its control socket" test ! -e "$XDG_RUNTIME_DIR/rock/ctl.$keepers"
t_check "the keeper reconnected and replayed" \
	grep -q ': reconnected; resending' "$t_tmp/writer.rock.log"
t_check "rockd ended the session cleanly" wait_for 10 grep -q ': both ends closed' "$t_tmp/rockd.log"

# ---- 2. nothing in flight: no keeper, and exit at once
backend
before=$(keeper_pids | wc -l)
start=$(now_ms)
head -c 1000 "$t_tmp/send.bin" | ROCK_DEBUG=1 ROCK_LOG="$t_tmp/small.rock.log" t_foreign \
	nn_c "$ROCK" socat -u - "TCP:$NN_S_ADDR:7000" 2>"$t_tmp/small.err"
t_eq "small: socat exit status" "$?" 0
nn_log "small: socat took $(($(now_ms) - start)) ms"
wait_pid "$backend_pid" 10 || t_bad "small: the backend had no end of file"
t_eq "small: 1000 bytes delivered" "$(cmp -n 1000 "$t_tmp/got.bin" "$t_tmp/send.bin" && stat -c %s "$t_tmp/got.bin")" 1000
t_eq "small: no keeper" "$(keeper_pids | wc -l)" "$before"
t_done
