#!/usr/bin/env bash
# man-pages.sh: librock(7) documents every ROCK_* variable of lib/rock_env.h with the library's own warning as example, rockd(8)'s SYNOPSIS has rockd --help's usage, and each man page renders without a warning.
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

# ENVIRONMENT's example warning is the library's, word for word.
example=$(sed -n '/^A bad value is reported once/,/the default applies/p' "$page" |
	tr '\n' ' ' | sed -n 's/.*("\(ROCK_.*\)"), and ignored.*/\1/p')
if [ ! -x "$ROCK" ]; then
	t_skipped "tools/rock not built: librock(7)'s example warning not compared"
else
	said=$(ROCK_LINGER_MS=-1 t_foreign "$ROCK" /bin/true 2>&1 | sed -n '1s/.*: warning: [a-z_]*: //p')
	t_eq "librock(7)'s example warning is what the library says" "$example" "$said"
fi

# rockd's usage lines: every option of --help in one (-h and -V aside), and
# the same options, form by form, as rockd(8)'s SYNOPSIS.
ROCKD="$top_builddir/daemon/rockd"
# forms: one line per form ("rockd ..." and its continuation lines), its
# option names sorted.
forms() {
	awk '$1 == "rockd" || $2 == "rockd" { if (f != "") print f; f = "" }
	     /rockd/ || /^ +\[/ { f = f " " $0 } END { print f }' |
		while read -r line; do
			echo "$line" | grep -o -- '-[-a-z]*[a-zA-Z]' | sort -u | tr '\n' ' '
			echo
		done
}
if [ ! -x "$ROCKD" ]; then
	t_skipped "rockd not built: its usage not compared"
else
	usage=$("$ROCKD" --help | sed '/^[A-Z]/,$d')
	missing=""
	for o in $("$ROCKD" --help | sed -n 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z-]*\).*/\1\2/p' | tr -d ' ' |
		grep -v -e '^-h,' -e '^-V,'); do
		short=${o%%,*} long=${o#*,}
		echo "$usage" | grep -q -e " $long[] ]" -e " \[$long[] ]" -e " \[$short[] ]" -e " $short " ||
			missing="$missing $long"
	done
	t_eq "rockd --help: every option in a usage line" "${missing# }" ""
	if command -v groff >/dev/null; then
		# Bold and italics are overstruck: what is left is the text.
		synopsis=$(groff -man -Tascii -rLL=400n "$top_srcdir/doc/rockd.8" 2>/dev/null |
			sed 's/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d')
		t_eq "rockd(8) SYNOPSIS: the options of rockd --help's usage, form by form" \
			"$(echo "$synopsis" | forms)" "$(echo "$usage" | forms)"
	fi
fi

if ! command -v groff >/dev/null; then
	t_skipped "groff not found (install the Debian package groff-base): pages not rendered"
else
	for p in doc/rock.1 doc/rock-haproxy.1 doc/rockd.8 doc/librock.7; do
		t_eq "$p renders with no warning" \
			"$(groff -man -ww -z "$top_srcdir/$p" 2>&1)" ""
	done
fi
t_done
