#!/usr/bin/env bash
# readme.sh: the README's first command as written, `sh tools/bootstrap.sh demo` with dash as sh, in a fresh copy of the tree: it installs, builds and shows the stream coming through; the second parses with dash (CI runs it).
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT
[ "$(id -u)" = 0 ] || t_skip_all "needs root (apt-get and network namespaces)"
command -v dash >/dev/null || t_skip_all "dash not installed"
command -v apt-get >/dev/null || t_skip_all "not a Debian system (no apt-get)"

# (b) is CI's own command (.ci/run): here, that it is plain sh that dash reads.
t_check "tools/bootstrap.sh parses with dash" dash -n "$top_srcdir/tools/bootstrap.sh"
t_check ".ci/run parses with dash and runs the README's command (b)" \
	sh -c "dash -n '$top_srcdir/.ci/run' && grep -q 'exec sh tools/bootstrap.sh check' '$top_srcdir/.ci/run'"
for cmd in "sh tools/bootstrap.sh demo" "sh tools/bootstrap.sh check"; do
	t_check "the README says: $cmd" grep -q "^ *$cmd\$" "$top_srcdir/README"
done

# (a): a copy of the sources, as a clone or the release tarball has them.
copy="$t_tmp/tree"
mkdir "$copy"
src=$(cd "$top_srcdir" && pwd -P)
if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then
	(cd "$src" && git ls-files -z -co --exclude-standard | xargs -0 -r cp --parents -t "$copy")
else
	# An unpacked tarball (make distcheck builds in _build and installs in
	# _inst inside it): its files, not those builds.
	tar -C "$src" --exclude=./_build --exclude=./_inst -cf - . | tar -C "$copy" -xf - &&
		chmod -R u+w "$copy"
fi
t_check "the copy of the tree has the README and tools/bootstrap.sh" \
	test -f "$copy/README" -a -f "$copy/tools/bootstrap.sh"
# As a user would run it: none of make check's settings, and at low
# priority beside the timing tests that may run meanwhile.
(cd "$copy" && env -u top_builddir -u top_srcdir -u ROCK_SAN_PRELOAD -u ASAN_OPTIONS \
	-u LD_PRELOAD -u NN_PROFILE nice -n 19 dash tools/bootstrap.sh demo) >"$t_tmp/demo.out" 2>&1
rc=$?
t_eq "sh tools/bootstrap.sh demo (dash): exit status" "$rc" 0
if grep -q 'every number once, in order' "$t_tmp/demo.out"; then
	t_ok "the demo: $(grep -m1 'lines, every number once' "$t_tmp/demo.out" | sed 's/^ *//')"
else
	t_bad "the demo did not show a complete stream under rock"
fi
t_check "the demo ran on the wan path profile" grep -q 'The path is "wan"' "$t_tmp/demo.out"
t_check "the plain socat did not come through the resets" \
	grep -q 'plain socat: \(died\|stuck\)' "$t_tmp/demo.out"
if grep -qi 'bad substitution\|syntax error\|: not found' "$t_tmp/demo.out"; then
	t_bad "a shell error in the output: $(grep -m1 -i 'bad substitution\|syntax error\|: not found' "$t_tmp/demo.out")"
else
	t_ok "no shell error on the way"
fi
[ "$t_fail" -eq 0 ] || tail -30 "$t_tmp/demo.out" | sed 's/^/    /'
t_done
