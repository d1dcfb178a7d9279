"""purelib - where `meson install` puts the bellows package for a prefix.

Run by agent/python/meson.build with the Python the package is for:
``python3 purelib.py PREFIX`` prints the absolute directory. The answer is
a directory that Python searches when the install prefix is one it knows:

- Debian's python3 (it has the ``deb_system`` scheme) searches
  ``/usr/lib/python3/dist-packages`` for the distribution's packages and
  ``/usr/local/lib/python3.X/dist-packages`` for local installs: prefix
  ``/usr`` gets the first (``deb_system``), ``/usr/local`` the second
  (``posix_local``); any other prefix ``PREFIX/lib/python3.X/site-packages``
  (``posix_prefix``, what ``pip install --prefix`` uses), which is on no
  path until PYTHONPATH names it. Meson's own choice,
  ``PREFIX/lib/python3/dist-packages``, is right only for ``/usr``.
- Any other Python (not Debian's, or a virtual environment): its default
  scheme's purelib with PREFIX as the base.
"""

import os
import sys
import sysconfig


def purelib(prefix: str) -> str:
    """The absolute purelib directory for installs under ``prefix``."""
    prefix = os.path.normpath(prefix)
    schemes = sysconfig.get_scheme_names()
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    if "deb_system" in schemes and not in_venv:
        if prefix == "/usr":
            scheme, base = "deb_system", prefix
        elif prefix == "/usr/local" and "posix_local" in schemes:
            # posix_local's paths are {base}/local/...: base is /usr.
            scheme, base = "posix_local", "/usr"
        else:
            scheme, base = "posix_prefix", prefix
    else:
        scheme = sysconfig.get_default_scheme() if hasattr(
            sysconfig, "get_default_scheme") else "posix_prefix"
        base = prefix
    return sysconfig.get_path("purelib", scheme,
                              vars={"base": base, "platbase": base})


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isabs(sys.argv[1]):
        sys.exit("usage: purelib.py PREFIX (an absolute path)")
    print(purelib(sys.argv[1]))
