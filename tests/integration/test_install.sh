#!/usr/bin/env bash
# `meson install` into a staging directory installs bellowsd, bellows,
# the plug-in worker, libbellows with its headers and pkg-config file, and the bellows Python
# package; a trainer builds against the installed tree alone, the library
# exports only bellows_* symbols, the installed Python package lands where
# /usr/bin/python3 looks (for /usr and /usr/local), every module of it
# imports and loads the installed library without BELLOWS_LIB, and a
# source checkout's package its build tree's.
. "$(dirname "$0")/lib.sh"

DEST="$TMP/stage"
DESTDIR="$DEST" meson install -C "$BUILD" --no-rebuild --quiet \
    >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "install"; }
for f in bellowsd bellows; do
	[ -x "$(find "$DEST" -path "*/bin/$f" | head -n 1)" ] ||
	    fail "$f not installed"
done
ok "bellowsd and bellows installed"
[ -x "$(find "$DEST" -path "*/libexec/bellows-plugin-worker" | head -n 1)" ] ||
    fail "bellows-plugin-worker not installed in libexec"
ok "bellows-plugin-worker installed in libexec (where bellowsd looks)"
pc=$(find "$DEST" -name bellows.pc | head -n 1)
lib=$(find "$DEST" -name 'libbellows.so.*.*' | head -n 1)
[ -n "$pc" ] && [ -n "$lib" ] || fail "library or pkg-config file missing"
for h in agent.h codec.h error.h export.h policy.h; do
	[ -f "$(find "$DEST" -path "*/include/bellows/$h" | head -n 1)" ] ||
	    fail "bellows/$h not installed"
done
ok "libbellows, its headers and bellows.pc installed"
for m in man8/bellowsd.8 man1/bellows.1 man5/bellows-policy.5; do
	[ -f "$(find "$DEST" -path "*/share/man/$m" | head -n 1)" ] ||
	    fail "man page $m not installed"
done
ok "bellowsd(8), bellows(1) and bellows-policy(5) installed"
for e in policies/demo.yaml policies/accordion_topk.yaml \
    policies/threshold_example/threshold.c c/trainer.c \
    pytorch/fashion_mnist.py; do
	[ -f "$(find "$DEST" -path "*/share/bellows/examples/$e" | head -n 1)" ] ||
	    fail "example $e not installed under share/bellows/examples"
done
[ -z "$(find "$DEST" -path "*/share/bellows/examples/*" -name meson.build)" ] ||
    fail "meson.build files installed with the examples"
ok "examples installed under share/bellows/examples"
[ -n "$(find "$DEST" -name bellowsd.service | head -n 1)" ] ||
    fail "bellowsd.service not installed"
ok "bellowsd.service installed at $(find "$DEST" -name bellowsd.service | head -n 1 | sed "s|$DEST||")"
# Build the example trainer against the staged tree only.
prefix=$(sed -n 's/^prefix=//p' "$pc")
flags=$(PKG_CONFIG_SYSROOT_DIR="$DEST" PKG_CONFIG_PATH="$(dirname "$pc")" \
    pkg-config --cflags --libs bellows) || fail "pkg-config bellows"
cc -std=c17 -Wall -Werror -o "$TMP/trainer" "$SRC/examples/c/trainer.c" \
    $flags -lm || fail "the example does not build against the install"
ok "examples/c/trainer.c builds with pkg-config against the install ($prefix)"
# The codecs through the installed bellows/codec.h: a 2-bit message of
# 3 values round-trips.
cat >"$TMP/codec.c" <<'EOF_C'
#include <bellows/codec.h>
int main(void) {
	float g[3] = { 0.7f, -0.9f, 0.1f }, out[3];
	unsigned char msg[32];
	bellows_codec *c = 0;
	size_t len = 0;
	if (bellows_codec_new(BELLOWS_CODEC_2BIT, 0.5f, 3, &c) ||
	    bellows_codec_encode(c, g, 3, msg, sizeof(msg), &len) ||
	    bellows_codec_decode(msg, len, out, 3, 0))
		return 1;
	bellows_codec_destroy(&c);
	return !(len == 20 && out[0] == 0.5f && out[1] == -0.5f && out[2] == 0.0f);
}
EOF_C
# A sanitizer build's library needs its runtime first in the program.
san=()
if ldd "$lib" | grep -q libasan; then
	san=(-fsanitize=address,undefined)
fi
cc -std=c17 -Wall -Werror "${san[@]}" -o "$TMP/codec" "$TMP/codec.c" \
    $flags ||
    fail "a program using bellows/codec.h does not build against the install"
LD_LIBRARY_PATH="$(dirname "$lib")" "$TMP/codec" ||
    fail "the installed codecs do not round-trip a 2-bit message"
ok "bellows/codec.h: a 2-bit message round-trips through the installed library"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDB]/ {print $3}' |
    grep -v '^bellows_' || true)
[ -z "$exported" ] || fail "exports beyond bellows_*: $exported"
ok "only bellows_* symbols exported ($(nm -D --defined-only "$lib" |
    grep -c ' T bellows_') functions)"
# The Python package: installed with a record of the install libdir, it
# loads the installed libbellows (here the staged one) with BELLOWS_LIB
# unset and nothing but its own directory on PYTHONPATH.
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	ok "no $PY: Python package checks skipped"
	exit 0
fi
if ldd "$lib" 2>/dev/null | grep -Eq 'lib(a|ub)san'; then
	# A sanitizer libbellows cannot be loaded into an uninstrumented
	# python3 (tests/python is not registered there either).
	ok "sanitizer build: Python package checks skipped"
	exit 0
fi
init=$(find "$DEST" -path '*/bellows/__init__.py' | head -n 1)
[ -n "$init" ] || fail "the Python package is not installed"
pkgdir=$(dirname "$init")
[ -f "$pkgdir/_install.py" ] || fail "_install.py not installed in $pkgdir"
# What bellows loaded, and a call through it (from $TMP: no source tree).
probe='import bellows, bellows._lib as L; print(L.library_path()); print(L.strerror(bellows.EINVAL))'
got=$(cd "$TMP" && env -u BELLOWS_LIB PYTHONPATH="$(dirname "$pkgdir")" \
    PYTHONDONTWRITEBYTECODE=1 "$PY" -c "$probe" 2>&1) ||
    fail "importing the installed package: $got"
loaded=$(echo "$got" | head -n 1)
pyfile=$(cd "$TMP" && env -u BELLOWS_LIB PYTHONPATH="$(dirname "$pkgdir")" \
    PYTHONDONTWRITEBYTECODE=1 "$PY" -c 'import bellows; print(bellows.__file__)')
[ "$pyfile" = "$init" ] || fail "imported $pyfile, not the installed $init"
case "$loaded" in
"$DEST"/*) ;;
*) fail "the installed package loaded $loaded, not the staged library" ;;
esac
[ "$(realpath "$loaded")" = "$(realpath "$lib")" ] ||
    fail "loaded $loaded, not the installed $lib"
[ -n "$(echo "$got" | sed -n 2p)" ] || fail "no strerror from $loaded"
ok "the installed package ($pkgdir) loads the installed $(basename "$loaded") without BELLOWS_LIB"
# Where it landed, once DESTDIR is stripped, is a directory /usr/bin/python3
# searches, for the prefixes it knows (/usr and /usr/local); for any
# prefix, purelib.py's answer is what was installed.
on_path() {
	"$PY" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$1"
}
site=$(dirname "${pkgdir#"$DEST"}")
# (-Dpython.purelibdir or -Dpython.install_env=system|venv: meson's
# module chose, as told.)
told=$(meson introspect --buildoptions "$BUILD" | "$PY" -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(int(bool(o.get("python.purelibdir")) or
          o.get("python.install_env") in ("system", "venv")))')
want=$("$PY" "$SRC/agent/python/purelib.py" "$prefix") ||
    fail "purelib.py $prefix"
[ "$told" = 1 ] || [ "$site" = "$want" ] ||
    fail "installed in $site, purelib.py says $want"
case "$prefix" in
/usr | /usr/local)
	on_path "$site" ||
	    fail "$site is not on $PY's sys.path: $("$PY" -c 'import sys; print(sys.path)')"
	ok "prefix $prefix: the package is in $site, on $PY's sys.path"
	;;
*) ok "prefix $prefix: the package is in $site (PYTHONPATH names it)" ;;
esac
for p in /usr /usr/local; do
	d=$("$PY" "$SRC/agent/python/purelib.py" "$p") || fail "purelib.py $p"
	on_path "$d" || fail "prefix $p would install into $d, not on sys.path"
done
ok "prefixes /usr and /usr/local install into $("$PY" "$SRC/agent/python/purelib.py" /usr) and $("$PY" "$SRC/agent/python/purelib.py" /usr/local), both on sys.path"
# Every module of the installed package imports (those needing torch when
# python3-torch is there), the library found as above.
mods=bellows.agent
if "$PY" -c 'import torch' 2>/dev/null; then
	mods="$mods bellows.resireduce bellows.compress bellows.activations bellows.torch"
fi
got=$(cd "$TMP" && env -u BELLOWS_LIB PYTHONPATH="$DEST$site" \
    PYTHONDONTWRITEBYTECODE=1 "$PY" -c '
import importlib, sys
import bellows._lib as L
print(L.library_path())
for m in sys.argv[1:]:
    print(importlib.import_module(m).__file__)' $mods 2>&1) ||
    fail "importing the installed modules ($mods): $got"
for f in $(echo "$got" | tail -n +2); do
	case "$f" in
	"$DEST$site"/bellows/*) ;;
	*) fail "imported $f, not from $DEST$site" ;;
	esac
done
ok "the installed $mods import with PYTHONPATH=$DEST$site, libbellows $(echo "$got" | head -n 1 | sed "s|$DEST||")"
# From a source checkout: the build tree beside the package, build/ first,
# else another build*/ (a copy of the package in a scratch tree, with the
# library of this build linked in).
tree="$TMP/checkout"
mkdir -p "$tree/agent/python" "$tree/build-b/agent"
cp -r "$SRC/agent/python/bellows" "$tree/agent/python/"
ln -s "$BUILD/agent/libbellows.so" "$tree/build-b/agent/libbellows.so"
from_tree() {
	(cd "$TMP" && env -u BELLOWS_LIB PYTHONPATH="$tree/agent/python" \
	    PYTHONDONTWRITEBYTECODE=1 "$PY" -c \
	    'import bellows._lib as L; print(L.library_path())')
}
loaded=$(from_tree) || fail "importing from the source tree: $loaded"
[ "$loaded" = "$tree/build-b/agent/libbellows.so" ] ||
    fail "the source package loaded $loaded, not build-b's"
mkdir -p "$tree/build/agent"
ln -s "$BUILD/agent/libbellows.so" "$tree/build/agent/libbellows.so"
loaded=$(from_tree) || fail "importing from the source tree: $loaded"
[ "$loaded" = "$tree/build/agent/libbellows.so" ] ||
    fail "the source package loaded $loaded, not build/'s"
ok "a source checkout's package loads its build tree's library (build/ first, else build*/)"
