#!/usr/bin/env bash
# dist/bellowsd.service passes systemd-analyze verify (with ExecStart
# pointed at the bellowsd of this build), runs bellowsd as a user of its
# own with its history in its state directory and the hardening options
# set; a unit with an unknown option fails the same check, so the check
# is not a no-op here. Skipped without systemd-analyze.
. "$(dirname "$0")/lib.sh"

command -v systemd-analyze >/dev/null || {
	echo "SKIP: systemd-analyze not available"
	exit 77
}
UNIT="$SRC/dist/bellowsd.service"
[ -f "$UNIT" ] || fail "dist/bellowsd.service missing"
mkdir -p "$TMP/units"
sed "s|^ExecStart=/usr/bin/bellowsd|ExecStart=$BELLOWSD|" "$UNIT" \
    >"$TMP/units/bellowsd.service"
grep -q "^ExecStart=$BELLOWSD " "$TMP/units/bellowsd.service" ||
    fail "ExecStart does not start /usr/bin/bellowsd"
systemd-analyze verify --man=no "$TMP/units/bellowsd.service" \
    >"$TMP/verify.out" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$TMP/verify.out")"
[ ! -s "$TMP/verify.out" ] ||
    fail "systemd-analyze verify warns: $(cat "$TMP/verify.out")"
ok "systemd-analyze verify accepts bellowsd.service"

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
policy=$(sed -n 's/^ExecStart=.* --policy \([^ ]*\).*/\1/p' "$UNIT")
[ "$policy" = /etc/bellows/bellows.yaml ] || fail "policy path '$policy'"
"$BELLOWSD" --help | grep -q -- "--db FILE" || fail "bellowsd has no --db"

sed 's/^PrivateTmp=yes/PrivateTmp=yes\nNoSuchOption=1/' \
    "$TMP/units/bellowsd.service" >"$TMP/units/broken.service"
systemd-analyze verify --man=no "$TMP/units/broken.service" \
    >"$TMP/verify.out" 2>&1
grep -q "NoSuchOption" "$TMP/verify.out" ||
    fail "systemd-analyze verify says nothing of an unknown option"
ok "an unknown option is reported by the same check"
