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

# The API as this host reaches it: https with the node's CA when contivd serves TLS (a
# non-loopback listener, or tls = "always"), else plain loopback HTTP.
read -r api ca_file < <(/usr/bin/contivd check-config --config /etc/contivd/contivd.toml | python3 -c '
import ipaddress, json, sys
c = json.load(sys.stdin)
host, _, port = c["api_listen"].rpartition(":")
host = host.strip("[]")
wildcard = host in ("0.0.0.0", "::", "")
try:
    loopback = not wildcard and ipaddress.ip_address(host).is_loopback
except ValueError:
    loopback = False
target = "127.0.0.1" if wildcard else host
if c["tls"] == "always" or not loopback:
    print(f"https://{target}:{port}", c["tls_ca"] or c["data_dir"] + "/tls/ca.crt")
else:
    print(f"http://{target}:{port}", "-")
')
ctl=(/usr/bin/contivd ctl --server "$api")
if [ "$ca_file" != - ]; then
    ctl+=(--ca-file "$ca_file")
fi
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
    if python3 -c "import ssl, sys, urllib.request
tls = ssl.create_default_context(cafile='$ca_file') if '$api'.startswith('https') else None
sys.exit(urllib.request.urlopen('$api/readyz', timeout=2, context=tls).status != 200)" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
# The first admin token, stored for root (contivd ctl reads it from ctl.toml): on the node's
# API socket root needs none, but other hosts do, and it is what `contivd ctl login` elsewhere
# is given (loopback TCP without a token only reads).
ctl_config="${XDG_CONFIG_HOME:-$HOME/.config}/contivd/ctl.toml"
if [ ! -s "$ctl_config" ]; then
    token_name="root-admin-$(date -u +%Y%m%d%H%M%S)"
    if /usr/bin/contivd auth bootstrap "$token_name" --login --config /etc/contivd/contivd.toml >/dev/null; then
        echo "admin token $token_name stored for root in $ctl_config (mode 0600; see docs/operations.md, Access control)"
    fi
fi
echo
echo "status page: $api/"
if [ "$ca_file" != - ] && [ -f "$ca_file" ]; then
    echo "TLS: cluster CA $ca_file, $(openssl x509 -in "$ca_file" -noout -fingerprint -sha256 | sed 's/^.*Fingerprint=/fingerprint (sha256) /')"
    echo "     from other hosts: contivd ctl --server https://<this node>:${api##*:} --fingerprint <that fingerprint> ..."
fi
echo "\$ contivd ${ctl[*]:1} cluster status"
"${ctl[@]}" cluster status
