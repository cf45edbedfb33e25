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

cp "$(type -P true)" "$t_tmp/suid-true" && chmod u+s "$t_tmp/suid-true"
"$ROCK" "$t_tmp/suid-true" 2>"$t_tmp/err"
t_check "setuid target warned" grep -q "warning: $t_tmp/suid-true is set-user-ID or set-group-ID" "$t_tmp/err"

printf 'int main(void) { return 0; }\n' >"$t_tmp/static.c"
if ${CC:-cc} -static -o "$t_tmp/static" "$t_tmp/static.c" 2>/dev/null; then
	"$ROCK" "$t_tmp/static" 2>"$t_tmp/err"
	t_eq "static target still runs" $? 0
	t_check "static target warned" grep -q "warning: $t_tmp/static is statically linked" "$t_tmp/err"
else
	t_skipped "no static C library to build a static test program"
fi
"$ROCK" true 2>"$t_tmp/err"
t_eq "a dynamic target gets no warning" "$(cat "$t_tmp/err")" ""

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
