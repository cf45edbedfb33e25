#!/usr/bin/env bash
# rock-wrapper.sh: the rock wrapper's command line, exit codes, warnings and LD_PRELOAD handling.
set -u
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT
lib=$LIBROCK
san=${ROCK_SAN_PRELOAD:+$ROCK_SAN_PRELOAD:}

"$ROCK" --help >"$t_tmp/out" 2>&1
t_eq "--help exits 0" $? 0
t_check "--help shows usage" grep -q '^usage: rock \[--keepalive-only\] \[-v\] \[--\] CMD \[ARGS...\]' "$t_tmp/out"

"$ROCK" --bogus true >"$t_tmp/out" 2>"$t_tmp/err"
t_eq "unknown option exits 2" $? 2
t_check "unknown option prints usage on stderr" grep -q '^usage: rock' "$t_tmp/err"
t_eq "unknown option prints nothing on stdout" "$(wc -c <"$t_tmp/out")" 0

"$ROCK" >/dev/null 2>"$t_tmp/err"
t_eq "no command exits 2" $? 2

"$ROCK" no-such-command-rocks >/dev/null 2>"$t_tmp/err"
t_eq "missing command exits 127" $? 127
t_eq "missing command message" "$(cat "$t_tmp/err")" "rock: no-such-command-rocks: command not found"

printf '#!/bin/sh\nexit 0\n' >"$t_tmp/noexec"
"$ROCK" "$t_tmp/noexec" 2>"$t_tmp/err"
t_eq "non-executable command exits 126" $? 126

sh -c 'exit 3'
"$ROCK" sh -c 'exit 3'
t_eq "the command's exit status passes through" $? 3

t_eq "arguments pass through unchanged" "$("$ROCK" -- printf '%s|' a 'b c' '' -v)" "a|b c||-v|"

t_eq "LD_PRELOAD set" "$(env -u LD_PRELOAD "$ROCK" printenv LD_PRELOAD)" "$san$lib"
other=$(ldconfig -p | awk '/libm\.so\.6 .*x86-64/ { print $NF; exit }')
if [ -n "$other" ]; then
	t_eq "existing LD_PRELOAD kept, ours first" \
		"$(LD_PRELOAD="$other" "$ROCK" printenv LD_PRELOAD)" "$san$lib:$other"
else
	t_skipped "no libm.so.6 found for the LD_PRELOAD check"
fi
t_eq "librock not preloaded twice" "$(LD_PRELOAD="$san$lib" "$ROCK" printenv LD_PRELOAD)" "$san$lib"
t_eq "--keepalive-only sets ROCK_MODE" "$(ROCK_MODE=rock "$ROCK" --keepalive-only printenv ROCK_MODE)" keepalive
t_eq "without --keepalive-only ROCK_MODE is the user's" "$(env -u ROCK_MODE "$ROCK" printenv ROCK_MODE; echo "rc=$?")" "rc=1"

"$ROCK" -v true 2>"$t_tmp/err"
t_check "-v says what it preloads" grep -q "^rock: running .*/true with $lib preloaded, mode rock" "$t_tmp/err"
t_check "-v turns the library's debug log on" grep -q 'librock\[[0-9]*\]: debug: log_settings: mode rock' "$t_tmp/err"

# Programs the preload cannot reach: one exact warning each, and they run.
plain="so its connections are plain TCP, untouched by rock"
uncovered() { # name file reason: run it under rock, one exact warning
	"$ROCK" "$2" 2>"$t_tmp/err"
	t_eq "$1: still runs" $? 0
	t_eq "$1: warned once, exactly" "$(cat "$t_tmp/err")" "rock: warning: $2 $3, $plain"
}
printf 'int main(void) { return 0; }\n' >"$t_tmp/static.c"
if ${CC:-cc} -static -o "$t_tmp/static" "$t_tmp/static.c" 2>/dev/null; then
	uncovered "static program" "$t_tmp/static" "is statically linked: LD_PRELOAD cannot reach it"
else
	t_skipped "no static C library to build a static test program"
fi
printf '%s\n' '__attribute__((section(".go.buildinfo"), used)) static const char b[] = "\377 Go buildinf:";' \
	'int main(void) { return 0; }' >"$t_tmp/go.c"
${CC:-cc} -o "$t_tmp/go" "$t_tmp/go.c"
uncovered "a Go program (.go.buildinfo), dynamically linked" "$t_tmp/go" "is a Go program: Go makes its own system calls"
mkdir "$t_tmp/sub" && ln -s "$t_tmp/go" "$t_tmp/sub/gotool"
PATH="$t_tmp/sub:$PATH" "$ROCK" gotool 2>"$t_tmp/err"
t_eq "a program found through PATH is named by its path" "$(cat "$t_tmp/err")" \
	"rock: warning: $t_tmp/sub/gotool is a Go program: Go makes its own system calls, $plain"
cp "$t_tmp/go" "$t_tmp/unreadable-go" && chmod 111 "$t_tmp/unreadable-go"
"$ROCK" true 2>"$t_tmp/err"
t_eq "a dynamic program gets no warning" "$(cat "$t_tmp/err")" ""
if [ "$(id -u)" -eq 0 ]; then
	cp "$(type -P true)" "$t_tmp/suid-true" && chown nobody "$t_tmp/suid-true" && chmod u+s "$t_tmp/suid-true"
	uncovered "set-user-ID to another user" "$t_tmp/suid-true" "is set-user-ID: the dynamic loader ignores LD_PRELOAD for it"
	cp "$(type -P true)" "$t_tmp/sgid-true" && chgrp nogroup "$t_tmp/sgid-true" && chmod g+s "$t_tmp/sgid-true"
	uncovered "set-group-ID to another group" "$t_tmp/sgid-true" "is set-group-ID: the dynamic loader ignores LD_PRELOAD for it"
	cp "$(type -P true)" "$t_tmp/suid-own" && chmod u+s "$t_tmp/suid-own"
	"$ROCK" "$t_tmp/suid-own" 2>"$t_tmp/err"
	t_eq "set-user-ID to the user running it: preloaded, no warning" "$(cat "$t_tmp/err")" ""
	cp "$(type -P true)" "$t_tmp/cap-true" && chmod go+x "$t_tmp"
	as_nobody="setpriv --reuid=nobody --regid=nogroup --clear-groups"
	if setcap cap_net_raw+ep "$t_tmp/cap-true" 2>/dev/null && $as_nobody test -r "$LIBROCK"; then
		$as_nobody "$ROCK" "$t_tmp/cap-true" 2>"$t_tmp/err"
		t_eq "file capabilities, run by a user: still runs" $? 0
		t_eq "file capabilities, run by a user: warned" "$(cat "$t_tmp/err")" \
			"rock: warning: $t_tmp/cap-true has file capabilities: the dynamic loader ignores LD_PRELOAD for it, $plain"
		"$ROCK" "$t_tmp/cap-true" 2>"$t_tmp/err"
		t_eq "file capabilities, run by root: preloaded, no warning" "$(cat "$t_tmp/err")" ""
		$as_nobody "$ROCK" "$t_tmp/unreadable-go" 2>"$t_tmp/err"
		t_eq "a Go program its user cannot read: runs, no warning" "$?:$(cat "$t_tmp/err")" "0:"
	else
		t_skipped "no setcap, or the build tree is not readable by nobody: file capabilities not checked"
	fi
else
	t_skipped "not root: set-user-ID, set-group-ID and file capabilities not checked"
fi
# A copy outside the build tree looks for the installed library instead.
cp "$ROCK" "$t_tmp/rock-copy"
installed=$(strings "$ROCK" | grep '^/.*/librock\.so$' | grep -v "^$top_builddir/")
if [ ! -e "$installed" ]; then
	"$t_tmp/rock-copy" true 2>"$t_tmp/err"
	t_eq "uninstalled copy fails with 1" $? 1
	t_check "uninstalled copy names the installed path" grep -q "^rock: $installed: No such file or directory" "$t_tmp/err"
else
	t_skipped "rocks is installed at $installed; copy check not meaningful"
fi
t_done
