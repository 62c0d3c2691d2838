#!/usr/bin/env bash
# Everything the test suite needs, from a fresh Debian machine, as root. Idempotent.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/packaging/deps.sh"
python3 -m pip install -q --disable-pip-version-check -e "$repo[test]"
