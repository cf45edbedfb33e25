#!/usr/bin/env bash
# rockd-unit.sh: make install puts rockd.service where systemd looks, and systemd-analyze verify passes it.
set -u
. "$(dirname "$0")/lib.sh"
trap t_finish EXIT
command -v systemd-analyze >/dev/null ||
	t_skip_all "systemd-analyze not found (install the Debian package systemd)"

# A make of our own, not a job of the make check that runs us.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_builddir" "$@"; }
unitdir=$(printf 'print-unitdir:\n\t@echo $(systemdsystemunitdir)\n' |
	mk -f Makefile -f - print-unitdir)
[ "$unitdir" != no ] ||
	t_skip_all "configured with --with-systemdsystemunitdir=no: no unit to install"
root="$t_tmp/root"
if ! mk install DESTDIR="$root" >"$t_tmp/install.log" 2>&1; then
	cat "$t_tmp/install.log"
	t_bad "make install DESTDIR=$root"
	t_done
fi
units=$(cd "$root" && find . -name rockd.service)
t_eq "make install installs one rockd.service, in $unitdir" "$units" ".$unitdir/rockd.service"
unit=$root$unitdir/rockd.service

# The unit names the installed rockd and the pid file it writes.
exe=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$unit")
t_check "ExecStart's $exe is the installed rockd" \
	eval '"$root$exe" --version | grep -q "^rockd (rocks) "'
pidfile=$(sed -n 's/^PIDFile=//p' "$unit")
t_check "rockd writes the PIDFile= systemd follows ($pidfile)" \
	grep -q "^ExecStart=$exe .*-p $pidfile\( \|$\)" "$unit"
t_check "reload is the hand-over (USR2 to the main pid)" \
	grep -qx 'ExecReload=/bin/kill -USR2 $MAINPID' "$unit"
ctl=$(sed -n 's/^#define ROCKD_CONTROL_DEFAULT "\(.*\)"$/\1/p' "$top_srcdir/tools/rock_ls.c")
t_check "rockd answers rock ls at its default socket ($ctl), in the RuntimeDirectory=" \
	eval 'grep -q "^ExecStart=$exe .*--control $ctl\( \|$\)" "$unit" &&
	 grep -qx "RuntimeDirectory=$(basename "$(dirname "$ctl")")" "$unit"'
t_check "files it makes are private (UMask=0077)" grep -qx 'UMask=0077' "$unit"
t_check "it starts once the network is online" eval \
	'grep -qx "After=network-online.target" "$unit" &&
	 grep -qx "Wants=network-online.target" "$unit"'

# verify checks that the commands exist and the man page opens: the copy
# names them where they are installed, not yet in /.
mandir=$(dirname "$(dirname "$(find "$root" -name rockd.8)")")
mkdir -p "$t_tmp/verify" "$t_tmp/broken"
sed "s|^ExecStart=$exe |ExecStart=$root$exe |" "$unit" >"$t_tmp/verify/rockd.service"
verify() { MANPATH=$mandir systemd-analyze verify "$1/rockd.service" >"$1/out" 2>&1; }
verify "$t_tmp/verify"
t_eq "systemd-analyze verify: exit status" "$?" 0
t_eq "systemd-analyze verify: no warning" "$(cat "$t_tmp/verify/out")" ""

# verify tells a broken unit here: a missing binary, an unknown setting.
sed -e "s|^ExecStart=$exe |ExecStart=$root$exe.missing |" \
	-e 's/^LimitNOFILE=/LimitNOFILES=/' "$unit" >"$t_tmp/broken/rockd.service"
verify "$t_tmp/broken"
t_eq "a broken unit fails verify" "$?" 1
t_check "its warnings name both faults" eval \
	'grep -q "rockd.missing.*not executable" "$t_tmp/broken/out" &&
	 grep -q "Unknown key .LimitNOFILES." "$t_tmp/broken/out"'
t_done
