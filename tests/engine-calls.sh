#!/usr/bin/env bash
# engine-calls.sh: no engine object (lib/rock_*.c) calls a function librock.so exports: the engine reaches the kernel through lib/rock_sys.c, never through the preload shim's hooks.
set -u
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT
command -v nm >/dev/null || t_skip_all "nm (binutils) not found"
engine="$top_builddir/lib/.libs/libengine.a"
[ -f "$engine" ] && [ -f "$LIBROCK" ] || t_skip_all "lib/.libs/libengine.a or librock.so not built"

# The names librock.so defines for the program: its hooks.
nm -D --defined-only "$LIBROCK" | awk '$2 == "T" || $2 == "W" { print $3 }' |
	sort -u >"$t_tmp/hooks"
t_check "librock.so exports the socket hooks (close, send, recv, socket among $(wc -l <"$t_tmp/hooks"))" \
	sh -c "grep -qx close '$t_tmp/hooks' && grep -qx send '$t_tmp/hooks' &&
		grep -qx recv '$t_tmp/hooks' && grep -qx socket '$t_tmp/hooks'"

# calls ARCHIVE: "member: hook hook..." for each member calling a hook.
calls() {
	nm -u -A "$1" 2>/dev/null | awk '{ n = split($1, p, ":"); print p[n - 1], $NF }' |
		sort -k2 | join -1 2 -2 1 - "$t_tmp/hooks" |
		awk '{ a[$2] = a[$2] " " $1 } END { for (m in a) print m ":" a[m] }' | sort
}

members=$(ar t "$engine" | grep -c '^libengine_la-rock_.*\.o$')
t_check "the engine archive holds its objects ($members)" [ "$members" -ge 20 ]
t_eq "engine objects calling a hook of librock.so" "$(calls "$engine")" ""

# The check finds such a call: an object calling close() and send().
cat >"$t_tmp/bad.c" <<'EOF'
#include <sys/socket.h>
#include <unistd.h>
int bad(int fd) { (void)send(fd, "x", 1, 0); return close(fd); }
EOF
if ${CC:-cc} -c -o "$t_tmp/libengine_la-rock_bad.o" "$t_tmp/bad.c" 2>"$t_tmp/cc.log" &&
	ar rc "$t_tmp/bad.a" "$t_tmp/libengine_la-rock_bad.o"; then
	t_eq "the check finds an object calling close() and send()" "$(calls "$t_tmp/bad.a")" \
		"libengine_la-rock_bad.o: close send"
else
	t_skipped "no C compiler: the check's own check not run"
fi
t_done
