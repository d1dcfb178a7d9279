#!/usr/bin/env bash
# `meson install` into a staging directory installs bellowsd, bellows,
# libbellows with its headers and pkg-config file; a trainer builds against
# the installed tree alone, and the library exports only bellows_* symbols.
. "$(dirname "$0")/lib.sh"

DEST="$TMP/stage"
DESTDIR="$DEST" meson install -C "$BUILD" --no-rebuild --quiet \
    >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "install"; }
for f in bellowsd bellows; do
	[ -x "$(find "$DEST" -path "*/bin/$f" | head -n 1)" ] ||
	    fail "$f not installed"
done
ok "bellowsd and bellows installed"
pc=$(find "$DEST" -name bellows.pc | head -n 1)
lib=$(find "$DEST" -name 'libbellows.so.*.*' | head -n 1)
[ -n "$pc" ] && [ -n "$lib" ] || fail "library or pkg-config file missing"
for h in agent.h error.h export.h policy.h; do
	[ -f "$(find "$DEST" -path "*/include/bellows/$h" | head -n 1)" ] ||
	    fail "bellows/$h not installed"
done
ok "libbellows, its headers and bellows.pc installed"
# Build the example trainer against the staged tree only.
prefix=$(sed -n 's/^prefix=//p' "$pc")
flags=$(PKG_CONFIG_SYSROOT_DIR="$DEST" PKG_CONFIG_PATH="$(dirname "$pc")" \
    pkg-config --cflags --libs bellows) || fail "pkg-config bellows"
cc -std=c17 -Wall -Werror -o "$TMP/trainer" "$SRC/examples/c/trainer.c" \
    $flags -lm || fail "the example does not build against the install"
ok "examples/c/trainer.c builds with pkg-config against the install ($prefix)"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDB]/ {print $3}' |
    grep -v '^bellows_' || true)
[ -z "$exported" ] || fail "exports beyond bellows_*: $exported"
ok "only bellows_* symbols exported ($(nm -D --defined-only "$lib" |
    grep -c ' T bellows_') functions)"
