#!/usr/bin/env bash
# The bellowsd.service `meson install` puts where systemd looks for this
# prefix names this build's bindir and sysconfdir (dist/meson.build), is
# Type=notify where bellowsd links libsystemd, and passes systemd-analyze
# verify once its bellowsd is the staged one (the install is staged under
# DESTDIR, where the prefix's path does not exist); it runs bellowsd as a
# user of its own with its history in its state directory and the
# hardening options set; a unit with an unknown option fails the same
# check, so the check is not a no-op here. Skipped without systemd-analyze.
. "$(dirname "$0")/lib.sh"

command -v systemd-analyze >/dev/null || {
	echo "SKIP: systemd-analyze not available"
	exit 77
}
DEST="$TMP/stage"
DESTDIR="$DEST" meson install -C "$BUILD" --no-rebuild --quiet \
    >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "install"; }
opt() {
	meson introspect --buildoptions "$BUILD" | /usr/bin/python3 -c '
import json, os, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(os.path.join(o["prefix"], o[sys.argv[1]]))' "$1"
}
prefix=$(opt prefix)
bindir=$(opt bindir)
sysconfdir=$(opt sysconfdir)
case "$prefix" in
/usr | /usr/local) unitdir="$prefix/lib/systemd/system" ;;
*) unitdir="$(opt datadir)/bellows/systemd" ;;
esac
UNIT="$DEST$unitdir/bellowsd.service"
[ -f "$UNIT" ] || fail "bellowsd.service not installed in $unitdir"
grep -q "^ExecStart=$bindir/bellowsd --policy $sysconfdir/bellows/bellows.yaml " \
    "$UNIT" || fail "ExecStart is not $bindir/bellowsd with $sysconfdir: $(grep ^ExecStart "$UNIT")"
[ -x "$DEST$bindir/bellowsd" ] || fail "no bellowsd installed in $bindir"
ok "installed in $unitdir: ExecStart=$bindir/bellowsd, policy in $sysconfdir/bellows"
if [ "${BELLOWS_HAVE_SYSTEMD:-0}" = 1 ]; then
	grep -q "^Type=notify$" "$UNIT" || fail "bellowsd links libsystemd, the unit is not Type=notify"
	ok "Type=notify (bellowsd sends READY=1 through sd_notify)"
else
	grep -q "^Type=exec$" "$UNIT" || fail "bellowsd without libsystemd, the unit is not Type=exec"
	ok "Type=exec (bellowsd built without libsystemd)"
fi
mkdir -p "$TMP/units"
sed "s|^ExecStart=$bindir/bellowsd|ExecStart=$DEST$bindir/bellowsd|" "$UNIT" \
    >"$TMP/units/bellowsd.service"
systemd-analyze verify --man=no "$TMP/units/bellowsd.service" \
    >"$TMP/verify.out" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$TMP/verify.out")"
[ ! -s "$TMP/verify.out" ] ||
    fail "systemd-analyze verify warns: $(cat "$TMP/verify.out")"
ok "systemd-analyze verify accepts the installed bellowsd.service"

for k in DynamicUser=yes StateDirectory=bellows ProtectSystem=strict \
    ProtectHome=yes NoNewPrivileges=yes PrivateTmp=yes \
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' \
    'CapabilityBoundingSet=$' 'ExecReload=/bin/kill -HUP $MAINPID'; do
	grep -q "^$k" "$UNIT" || fail "bellowsd.service lacks $k"
done
grep -q -- "--db %S/bellows/bellows.db" "$UNIT" ||
    fail "the history is not in the state directory"
ok "own user, state directory history, hardening, reload by SIGHUP"

# The options ExecStart passes are bellowsd's.
"$BELLOWSD" --help | grep -q -- "--db FILE" || fail "bellowsd has no --db"

sed 's/^PrivateTmp=yes/PrivateTmp=yes\nNoSuchOption=1/' \
    "$TMP/units/bellowsd.service" >"$TMP/units/broken.service"
systemd-analyze verify --man=no "$TMP/units/broken.service" \
    >"$TMP/verify.out" 2>&1
grep -q "NoSuchOption" "$TMP/verify.out" ||
    fail "systemd-analyze verify says nothing of an unknown option"
ok "an unknown option is reported by the same check"
