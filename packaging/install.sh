#!/usr/bin/env bash
# Install contivd from this checkout and start it as a single node (embedded store).
# Run as root on Debian 12. Running it twice is harmless.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/packaging/deps.sh"
python3 -m pip install -q --disable-pip-version-check "$repo"
python=$(python3 -c 'import sys; print(sys.executable)')
mkdir -p /var/lib/contivd /var/log/contivd
chmod 0700 /var/lib/contivd

if [ "$(ps -p 1 -o comm=)" = systemd ]; then
    sed "s|@PYTHON@|$python|" "$repo/systemd/contivd.service" >/etc/systemd/system/contivd.service
    systemctl daemon-reload
    systemctl enable --now contivd
    echo "contivd runs under systemd: systemctl status contivd; journalctl -u contivd"
else
    pidfile=/run/contivd.pid
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "contivd already running (pid $(cat "$pidfile"))"
    else
        nohup "$python" -m contivd run >>/var/log/contivd/contivd.log 2>&1 &
        echo $! >"$pidfile"
        echo "contivd started (pid $!); log: /var/log/contivd/contivd.log; stop: kill \$(cat $pidfile)"
    fi
fi
"$python" -m contivd --version
