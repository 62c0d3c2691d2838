#!/usr/bin/env bash
# Build contivd's .deb from this checkout, install it and start contivd as a single node
# (embedded store). Run as root on Debian 12. Running it twice is harmless.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bash packaging/deps.sh
python3 -m pip install -q --disable-pip-version-check shiv
bash packaging/build-binary
bash packaging/build-deb
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "./dist/contivd_${version}_$(dpkg --print-architecture).deb" >/dev/null

api=http://127.0.0.1:9999
if [ "$(ps -p 1 -o comm=)" = systemd ]; then
    systemctl enable --now contivd
    echo "contivd runs under systemd: systemctl status contivd; journalctl -u contivd; stop: systemctl stop contivd"
else
    # No systemd as PID 1 (a container): run it in the background, as the unit would.
    pidfile=/run/contivd.pid
    mkdir -p /var/log/contivd
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "contivd already running (pid $(cat "$pidfile")); restart: kill \$(cat $pidfile) && bash packaging/install.sh"
    else
        nohup /usr/bin/contivd run --config /etc/contivd/contivd.toml >>/var/log/contivd/contivd.log 2>&1 &
        echo $! >"$pidfile"
        echo "contivd started (pid $!); log: /var/log/contivd/contivd.log; stop: kill \$(cat $pidfile)"
    fi
fi

for _ in $(seq 120); do
    if python3 -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('$api/readyz', timeout=2).status != 200)" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
# The first admin token, stored for root (contivd ctl reads it from ctl.toml): on loopback root
# needs none, but other hosts do, and it is what `contivd ctl login` elsewhere is given.
ctl_config="${XDG_CONFIG_HOME:-$HOME/.config}/contivd/ctl.toml"
if [ ! -s "$ctl_config" ]; then
    token_name="root-admin-$(date -u +%Y%m%d%H%M%S)"
    if /usr/bin/contivd auth bootstrap "$token_name" --login --config /etc/contivd/contivd.toml >/dev/null; then
        echo "admin token $token_name stored for root in $ctl_config (mode 0600; see docs/operations.md, Access control)"
    fi
fi
echo
echo "status page: $api/"
echo "\$ contivd ctl cluster status"
/usr/bin/contivd ctl cluster status
