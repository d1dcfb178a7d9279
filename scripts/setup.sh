#!/usr/bin/env bash
# setup.sh - install the Debian packages bellows needs.
#
#   scripts/setup.sh build   compiler, meson, the libraries, clang-format, tmux
#   scripts/setup.sh full    build + PyTorch, Fashion-MNIST, python3-yaml,
#                            python3-zmq, python3-venv and python3-mesonpy
#                            (the wheel's tests), chromium (renders the
#                            HTML report in its test), prometheus (promtool
#                            and the server the metrics tests scrape
#                            with), and the torch 2.x venv (below)
#   scripts/setup.sh torch2  the torch 2.x venv alone
#
# Debian's python3-torch is 1.13; our users train on PyPI's torch 2.x, so
# the Python tests run under both. `full` (as root) also makes a venv of
# Debian's python3 with PyPI's current torch 2.x, numpy, PyYAML and pyzmq
# at $BELLOWS_TORCH2_VENV (default /var/cache/bellows/torch2), once: a
# venv whose torch imports is kept. The Python package's linter and type
# checker (ruff, mypy: tests/python/check_package.sh) are installed there
# too, into a kept venv that lacks them. PyPI's Linux wheel brings NVIDIA's
# CUDA libraries (several GB; the first install takes minutes). The
# tests find it through meson's -Dtorch2_python (scripts/test.sh).
# BELLOWS_NO_TORCH2=1 skips it.
#
# This file holds the one list of packages; scripts/test.sh and
# scripts/demo.sh call it with `full`. Only the missing packages are
# installed, in one apt-get call. As root it installs them itself; otherwise
# it prints the sudo line to run and exits 1. Set BELLOWS_NO_SETUP=1 to skip
# the check (e.g. on a system that is not Debian and has the equivalents).
set -euo pipefail

BUILD_PACKAGES=(
	build-essential
	pkg-config
	meson
	ninja-build
	libzmq3-dev
	libprotobuf-c-dev
	protobuf-c-compiler
	libsqlite3-dev
	sqlite3
	libmicrohttpd-dev
	libyaml-dev
	libcmocka-dev
	libzstd-dev
	libzfp-dev
	libopenblas-dev
	libncurses-dev
	libsystemd-dev
	clang-format
	tmux
)

# Big (PyTorch alone is several hundred MB), but the demo and the tests need
# them: the PyTorch trainer and its integration tests.
FULL_PACKAGES=(
	python3-torch
	dataset-fashion-mnist
	python3-yaml
	python3-zmq
	python3-venv
	python3-mesonpy
	chromium
	prometheus
)

usage()
{
	echo "usage: $0 build|full|torch2" >&2
	exit 2
}

if [ "${BELLOWS_NO_SETUP:-0}" = 1 ]; then
	exit 0
fi

[ $# -eq 1 ] || usage
case "$1" in
build) wanted=("${BUILD_PACKAGES[@]}") ;;
full) wanted=("${BUILD_PACKAGES[@]}" "${FULL_PACKAGES[@]}") ;;
torch2) wanted=() ;;
*) usage ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "setup: dpkg-query not found; this script knows Debian 12 only." >&2
	echo "setup: install the equivalents of: ${wanted[*]}" >&2
	echo "setup: then run again with BELLOWS_NO_SETUP=1." >&2
	exit 1
fi

missing=()
for pkg in "${wanted[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	if [ "$status" != "install ok installed" ]; then
		missing+=("$pkg")
	fi
done

# ZipNN from PyPI in the torch 2.x venv at $1, for bench/gcomp/vs_zipnn.py
# only: added as root when missing; a failure is said, not fatal.
torch2_zipnn()
{
	if "$1/bin/python" -c 'import zipnn' >/dev/null 2>&1 ||
		[ "$(id -u)" -ne 0 ]; then
		return 0
	fi
	"$1/bin/pip" install -q --disable-pip-version-check zipnn ||
		echo "setup: zipnn did not install (bench/gcomp/vs_zipnn.py" \
			"needs it)" >&2
}

# The torch 2.x venv (see the top): made once, as root, kept while its
# torch imports.
torch2_venv()
{
	local venv=${BELLOWS_TORCH2_VENV:-/var/cache/bellows/torch2}
	if [ "${BELLOWS_NO_TORCH2:-0}" = 1 ]; then
		return 0
	fi
	if "$venv/bin/python" -c 'import torch, numpy, yaml, zmq' \
		>/dev/null 2>&1; then
		if ! "$venv/bin/python" -c 'import mypy, ruff' \
			>/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
			"$venv/bin/pip" install -q --disable-pip-version-check \
				mypy ruff
		fi
		torch2_zipnn "$venv"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: no torch 2.x venv at $venv; as root this script" \
			"makes it (or set BELLOWS_NO_TORCH2=1)" >&2
		return 0
	fi
	echo "setup: making the torch 2.x venv at $venv (PyPI's torch with" \
		"its CUDA libraries: several GB, minutes)" >&2
	rm -rf "$venv"
	mkdir -p "$(dirname "$venv")"
	/usr/bin/python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check \
		'torch>=2,<3' numpy pyyaml pyzmq mypy ruff
	torch2_zipnn "$venv"
	"$venv/bin/python" -c 'import torch; print("setup: torch",
		torch.__version__, "in", __import__("sys").prefix)' >&2
}

if [ ${#missing[@]} -eq 0 ]; then
	if [ "$1" != build ]; then
		torch2_venv
	fi
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "setup: missing Debian packages: ${missing[*]}" >&2
	echo "setup: install them with:" >&2
	echo "sudo apt-get install -y --no-install-recommends ${missing[*]}"
	exit 1
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}"
if [ "$1" != build ]; then
	torch2_venv
fi
