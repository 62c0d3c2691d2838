#!/usr/bin/env bash
# Build the `contiv` CNI plugin as installed: a plain script PLUGIN (default /opt/cni/bin/contiv)
# run with `PYTHON -IS` (isolated, no site: site alone costs ~10 ms) that imports the cni package
# from LIBDIR (default /usr/lib/contivd/cni-plugin), where this copies cni/{__init__,plugin,
# protocol}.py. With DESTDIR set, files are written under DESTDIR while the paths baked into the
# script stay as given (as `make install DESTDIR=` does).
#
# Why a launcher importing from a fixed directory rather than one script with protocol.py
# inlined: a script is compiled on every run (~2 ms for these ~300 lines), an imported module
# is read from its .pyc (~0.05 ms); the .deb's postinst writes those .pyc files (and the plugin,
# run as root, would write them on its first run anyway). Why not a zip app: zipimport and runpy
# cost ~15 ms per start. Measurements: docs/performance.md, "CNI".
# usage: [DESTDIR=DIR] packaging/build-cni-plugin.sh [PLUGIN [LIBDIR [PYTHON]]]   (PYTHON: /usr/bin/python3)
set -euo pipefail
plugin=${1:-/opt/cni/bin/contiv}
libdir=${2:-/usr/lib/contivd/cni-plugin}
python=${3:-/usr/bin/python3}
destdir=${DESTDIR:-}
src=$(cd "$(dirname "$0")/.." && pwd)
case "$libdir" in
/*) ;;
*) echo "build-cni-plugin: LIBDIR must be absolute (it is baked into the plugin): $libdir" >&2; exit 1 ;;
esac
install -d -m 0755 "$destdir$libdir/cni" "$(dirname "$destdir$plugin")"
install -m 0644 "$src"/cni/__init__.py "$src"/cni/plugin.py "$src"/cni/protocol.py "$destdir$libdir/cni/"
cat >"$destdir$plugin.tmp" <<SCRIPT
#!$python -IS
"""The contiv CNI plugin (built by contivd's packaging/build-cni-plugin.sh; code: $libdir/cni)."""
import sys

sys.path.insert(0, "$libdir")
from cni.plugin import main

sys.exit(main())
SCRIPT
chmod 0755 "$destdir$plugin.tmp"
mv "$destdir$plugin.tmp" "$destdir$plugin"
