#!/usr/bin/env bash
# man-pages.sh: librock(7) documents every ROCK_* variable of lib/rock_env.h, and each man page renders without a warning.
set -u
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT

page="$top_srcdir/doc/librock.7"
# Each name a #define of lib/rock_env.h gives a ROCK_ENV_* macro.
names=$(sed -n 's/^#define[[:space:]]\{1,\}ROCK_ENV_[A-Z_]\{1,\}[[:space:]]\{1,\}"\([A-Z_]*\)".*/\1/p' \
	"$top_srcdir/lib/rock_env.h")
t_check "lib/rock_env.h names ROCK_* variables ($(echo "$names" | wc -l))" \
	[ "$(echo "$names" | grep -c '^ROCK_')" -ge 10 ]
# Documented: an entry of ENVIRONMENT, a .TP whose tag line names it.
tags=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH /{/^\.TP/{n;p;}}' "$page")
missing=""
for n in $names; do
	echo "$tags" | grep -q "^\.BR\{0,1\} .*\b$n\b" || missing="$missing $n"
done
t_eq "librock(7) has an ENVIRONMENT entry for each" "${missing# }" ""

if ! command -v groff >/dev/null; then
	t_skipped "groff not found (install the Debian package groff-base): pages not rendered"
else
	for p in doc/rock.1 doc/rockd.8 doc/librock.7; do
		t_eq "$p renders with no warning" \
			"$(groff -man -ww -z "$top_srcdir/$p" 2>&1)" ""
	done
fi
t_done
