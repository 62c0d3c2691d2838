"""contivd's configuration: one declared table of options, one loader, one error type.

Every option can come from a command-line flag, an environment variable `CONTIVD_<NAME>` or a
TOML file (`--config`), in that order of precedence, else its default. Unknown keys and bad
values are refused with a message naming the option and where its value came from.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from raftstore import FollowerConfig, StoreConfig, StoreConfigError, is_loopback

log = logging.getLogger("contivd.config")


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the option and the source."""


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value.strip()


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on", "0", "false", "no", "off"}:
        return value.strip().lower() in {"1", "true", "yes", "on"}
    raise ValueError("must be true or false")


def _address_list(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(_text(v) for v in items if str(v).strip())


def _tcp_address(text: str) -> tuple[str, int] | None:
    """`host:port` as (host, port), or None when `text` is not of that form."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


def _listen_address(value: Any) -> str:
    text = _text(value)
    if _tcp_address(text) is None:
        raise ValueError("must be host:port with a port from 1 to 65535")
    return text


def _openflow_listen(value: Any) -> str:
    text = _text(value)
    address = _tcp_address(text)
    if address is None:
        return str(_socket_path(text))
    if not is_loopback(address[0]):
        raise ValueError("must be a unix socket path or a loopback host:port (a switch on another host is not supported)")
    return text


def _ip(value: Any) -> str:
    text = str(value).strip()
    if text:
        ipaddress.ip_address(text)  # ValueError names the problem
    return text


def _datapath(value: Any) -> str:
    text = _text(value).lower()
    if text not in ("ovs", "none"):
        raise ValueError("must be ovs or none")
    return text


def _ovs_target(value: Any) -> str:
    text = _text(value)
    if text not in ("auto", "managed") and not text.startswith(("unix:", "tcp:")):
        raise ValueError("must be managed, auto, or an OVSDB target like unix:/run/openvswitch/db.sock")
    return text


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(value).lower()
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


def _interface_names(value: Any) -> tuple[str, ...]:
    names = _address_list(value)
    for name in names:
        if len(name) > 15 or "/" in name or any(c.isspace() for c in name):
            raise ValueError(f"{name!r} is not a network interface name (at most 15 characters, no '/' or spaces)")
    return names


def _audit_interval(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError("must be a number of seconds") from None
    if not 2 <= seconds <= 86400:
        raise ValueError("must be between 2 seconds and one day (86400)")
    return seconds


def _orphan_grace(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError("must be a number of seconds") from None
    if not 1 <= seconds <= 86400:
        raise ValueError("must be between 1 second and one day (86400)")
    return seconds


def _log_level(value: Any) -> str:
    level = _text(value).upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("must be one of debug, info, warning, error")
    return level


def _socket_path(value: Any) -> Path:
    path = Path(_text(value))
    if len(str(path).encode()) > 107:
        raise ValueError("must be a path of at most 107 bytes (the unix socket limit)")
    return path


def _readable_file(value: Any) -> Path:
    path = Path(_text(value))
    if not path.is_file() or not os.access(path, os.R_OK):
        raise ValueError("must be a readable file")
    return path


def _service_cidr(value: Any) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.IPv4Network(_text(value))
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 network in CIDR notation with no host bits set, like 10.96.0.0/12 ({exc})") from None
    if network.prefixlen > 30:
        raise ValueError("must be a network of at least 4 addresses (a prefix of /30 or shorter)")
    return network


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[Any], Any]
    default: Callable[[], Any]
    help: str
    flag: bool = False
    shown_default: str | None = None  # for defaults that depend on the machine (docs, generated TOML)

    @property
    def env(self) -> str:
        return "CONTIVD_" + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("node_name", _text, socket.gethostname, "Name of this node in the cluster (default: the hostname).", shown_default="the hostname"),
    Option("data_dir", lambda v: Path(_text(v)), lambda: Path("/var/lib/contivd"), "Where the Raft journal and snapshots live."),
    Option("api_listen", _listen_address, lambda: "127.0.0.1:9999", "Netmaster REST API address (host:port)."),
    Option("raft_listen", _text, lambda: "127.0.0.1:9002", "Raft address of this node (host:port)."),
    Option(
        "peers",
        _address_list,
        tuple,
        "Comma-separated Raft addresses of the other voters (of every voter, with --follower); empty = single node.",
    ),
    Option(
        "follower",
        _boolean,
        lambda: False,
        "Run as a follower of the store, not a Raft member: state from a voter of --peers, writes forwarded to the leader "
        "(every node but the 3 or 5 voters; docs/operations.md).",
        flag=True,
    ),
    Option("readonly", _boolean, lambda: False, "Deprecated alias of --follower (logs a warning).", flag=True),
    Option("cluster_secret", _text, lambda: None, "Shared secret authenticating and encrypting all node-to-node traffic."),
    Option("control_ip", _ip, lambda: "", "This node's address peers reach it on (default: the API listen host)."),
    Option("datapath", _datapath, lambda: "ovs", "ovs (run the node agent on Open vSwitch) or none (control plane only)."),
    Option("ovs", _ovs_target, lambda: "auto", "managed, auto (system OVS if running, else managed) or an OVSDB target."),
    Option("vtep_ip", _ip, lambda: "", "VXLAN tunnel endpoint address of this node (default: the control IP)."),
    Option(
        "openflow_listen",
        _openflow_listen,
        lambda: "contivd/openflow.sock",
        "Where the local bridges' OpenFlow connections come in: a root-only unix socket (directory 0700, socket 0600), so no other "
        "local process can connect as the switch; relative = under the run directory of the OVS contivd drives (<data-dir>/ovs for "
        "the managed OVS, /var/run/openvswitch for the system's): ovs-vswitchd connects only to controller sockets inside it. A "
        "loopback host:port is accepted too (for an ovs-vswitchd that cannot reach a root-only socket) but is less safe: any "
        "local process can then connect to it as the switch.",
    ),
    Option(
        "net_mode",
        _choice("vxlan", "vlan"),
        lambda: "vxlan",
        "vxlan (VXLAN bridge, plus the VLAN bridge when uplinks are given) or vlan (VLAN bridge only).",
    ),
    Option("vlan_uplinks", _interface_names, tuple, "Comma-separated interfaces trunking VLAN networks to other nodes (ports of contivVlanBridge)."),
    Option(
        "fwd_mode",
        _choice("bridge", "routing"),
        lambda: "bridge",
        "bridge (L2 within a network, Contiv's default) or routing (the VLAN bridge routes pods' traffic; needs one --vlan-uplink to the "
        "BGP top-of-rack router and the node's Bgp object, see docs/bgp.md).",
    ),
    Option(
        "api_socket",
        _socket_path,
        lambda: Path("/run/contivd/api.sock"),
        "Root-only unix socket of the API: root on this node is admin there without a token (`contivd ctl` as root uses it); "
        "relative = under --data-dir.",
    ),
    Option(
        "loopback_access",
        _choice("viewer", "none"),
        lambda: "viewer",
        "What a loopback TCP caller without a token may do: viewer (read, e.g. the status page) or none (401). Never more: writes need "
        "a token or --api-socket.",
    ),
    Option(
        "agent_listen",
        _listen_address,
        lambda: "127.0.0.1:9090",
        "The node agent's REST API (netplugin's /inspect/driver, /svcstats, ...): the netmaster's signed calls only.",
    ),
    Option(
        "agent_socket",
        _socket_path,
        lambda: Path("/run/contivd/agent.sock"),
        "Root-only unix socket of the node agent's REST API; relative = under --data-dir.",
    ),
    Option(
        "audit_interval",
        _audit_interval,
        lambda: 60.0,
        "Seconds between audits of each bridge's flows against a full recomputation and the switch (drift is reported and repaired).",
    ),
    Option("log_level", _log_level, lambda: "INFO", "debug, info, warning or error."),
    Option(
        "contiv_error_compat",
        _boolean,
        lambda: False,
        "Answer API errors as Contiv did (500, text/plain) for scripts that parse old netctl output.",
        flag=True,
    ),
    Option("log_format", _choice("text", "json"), lambda: "text", "text (one line per event) or json (one JSON object per line, for log shippers)."),
    Option(
        "cni_socket",
        _socket_path,
        lambda: Path("/run/contiv/contiv-cni.sock"),
        "Unix socket of the CNI server (with --datapath ovs); relative = under --data-dir.",
    ),
    Option(
        "orphan_grace",
        _orphan_grace,
        lambda: 30.0,
        "Seconds a CNI endpoint of this node may lack its pod end (veth gone with its namespace) before it is deleted and its address freed.",
    ),
    Option(
        "kubeconfig",
        _readable_file,
        lambda: None,
        "Kubeconfig: Kubernetes mode (pod labels on CNI ADD, the leader watches Services); unset = no Kubernetes.",
    ),
    Option(
        "service_cidr",
        _service_cidr,
        lambda: ipaddress.IPv4Network("10.96.0.0/12"),
        "Kubernetes Service cluster IP range (the API server's --service-cluster-ip-range); Services outside it are skipped.",
    ),
    Option(
        "tls",
        _choice("auto", "always"),
        lambda: "auto",
        "auto: TLS on every listener (API, agent API, status page) bound to a non-loopback address, plain HTTP on loopback; always: TLS on loopback too.",
    ),
    Option(
        "tls_cert", _readable_file, lambda: None, "This node's TLS certificate (PEM); with --tls-key and --tls-ca. Unset = issued by the cluster CA."
    ),
    Option("tls_key", _readable_file, lambda: None, "The private key of --tls-cert (PEM)."),
    Option("tls_ca", _readable_file, lambda: None, "The CA (PEM) that issued every node's certificate; peers are verified against it."),
)


@dataclass(frozen=True)
class Config:
    node_name: str
    data_dir: Path
    api_listen: str
    raft_listen: str
    peers: tuple[str, ...]
    follower: bool
    readonly: bool  # deprecated, given: --follower is set too (load)
    cluster_secret: str | None
    control_ip: str
    datapath: str
    ovs: str
    vtep_ip: str
    openflow_listen: str
    net_mode: str
    vlan_uplinks: tuple[str, ...]
    fwd_mode: str
    api_socket: Path
    loopback_access: str
    agent_listen: str
    agent_socket: Path
    audit_interval: float
    log_level: str
    contiv_error_compat: bool
    log_format: str
    cni_socket: Path
    orphan_grace: float
    kubeconfig: Path | None
    service_cidr: ipaddress.IPv4Network
    tls: str = "auto"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None

    @property
    def api_host(self) -> str:
        return self.api_listen.rpartition(":")[0].strip("[]")

    @property
    def api_port(self) -> int:
        return int(self.api_listen.rpartition(":")[2])

    @property
    def node_ip(self) -> str:
        """The address other nodes use for this one (control IP, else the API host)."""
        if self.control_ip:
            return self.control_ip
        return "127.0.0.1" if self.api_host in ("0.0.0.0", "::", "") else self.api_host

    def listener_tls(self, listen: str) -> bool:
        """Whether a listener serves TLS: always off loopback, on loopback with `--tls always`."""
        return self.tls == "always" or not is_loopback(listen.rpartition(":")[0].strip("[]"))

    @property
    def uses_tls(self) -> bool:
        return self.listener_tls(self.api_listen) or (self.datapath == "ovs" and self.listener_tls(self.agent_listen))

    def _url(self, listen: str) -> str:
        host, port, scheme = self.node_ip, listen.rpartition(":")[2], "https" if self.listener_tls(listen) else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    @property
    def api_url(self) -> str:
        return self._url(self.api_listen)

    @property
    def agent_url(self) -> str:
        """Where other nodes reach this node's agent API: the node IP, agent_listen's port."""
        return self._url(self.agent_listen)

    @property
    def api_ca_file(self) -> Path | None:
        """The CA the API's TLS certificate chains to (the operator's, else the one the node
        writes from the store); None when the API is plain HTTP."""
        if not self.listener_tls(self.api_listen):
            return None
        return self.tls_ca or self.tls_dir / "ca.crt"

    @property
    def tls_dir(self) -> Path:
        """Where the node keeps the certificate the cluster CA issued it (and that CA)."""
        return self.data_dir / "tls"

    @property
    def tls_hosts(self) -> tuple[str, ...]:
        """What this node's certificate must name: every address it is reached on, its name, loopback."""
        listened = [listen.rpartition(":")[0].strip("[]") for listen in (self.api_listen, self.agent_listen)]
        specific = [host for host in listened if host not in ("0.0.0.0", "::", "")]
        return tuple(dict.fromkeys([self.node_ip, *specific, "127.0.0.1", "::1", "localhost", self.node_name]))

    @property
    def cni_socket_path(self) -> Path:
        """The CNI socket; a relative --cni-socket lives under the data dir (one per node on a test host)."""
        return self._under_data_dir(self.cni_socket)

    @property
    def api_socket_path(self) -> Path:
        return self._under_data_dir(self.api_socket)

    @property
    def agent_socket_path(self) -> Path:
        return self._under_data_dir(self.agent_socket)

    @property
    def openflow_address(self) -> Path | tuple[str, int]:
        """The OpenFlow controller's unix socket (relative: to the OVS run directory) or loopback TCP address."""
        return _tcp_address(self.openflow_listen) or Path(self.openflow_listen)

    def _under_data_dir(self, path: Path) -> Path:
        return path if path.is_absolute() else self.data_dir / path

    def store_config(self) -> StoreConfig:
        """A voter's store settings; raises ConfigError for unsafe combinations (and on a
        follower, which has no Raft member: restore and recover make voters)."""
        if self.follower:
            raise ConfigError(
                "--follower: a follower of the store is no Raft member (it has no journal to restore or recover); run without --follower"
            )
        try:
            return StoreConfig(
                listen=self.raft_listen,
                peers=self.peers,
                secret=self.cluster_secret,
                data_dir=self.data_dir / "raft",
            )
        except StoreConfigError as exc:
            raise ConfigError(str(exc)) from None

    def follower_config(self) -> FollowerConfig:
        """A follower's store settings: the voters of --peers, this node's name, the secret."""
        try:
            return FollowerConfig(voters=self.peers, name=self.node_name, secret=self.cluster_secret)
        except StoreConfigError as exc:
            raise ConfigError(f"--follower: {exc}") from None

    def describe(self) -> dict[str, Any]:
        """The effective configuration with the secret masked, for logs and check-config."""
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("data_dir", "cni_socket", "api_socket", "agent_socket"):
            shown[name] = str(getattr(self, name))
        shown["kubeconfig"] = str(self.kubeconfig) if self.kubeconfig else None
        shown["service_cidr"] = str(self.service_cidr)
        for name in ("tls_cert", "tls_key", "tls_ca"):
            shown[name] = str(getattr(self, name)) if getattr(self, name) else None
        shown["peers"] = list(self.peers)
        shown["vlan_uplinks"] = list(self.vlan_uplinks)
        if self.cluster_secret:
            shown["cluster_secret"] = "********"
        return shown


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    known = {o.name for o in OPTIONS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"config file {path}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return data


def load(flags: Mapping[str, Any], config_file: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Resolve every option from flags (None = not given), environment, file, default."""
    environ = os.environ if environ is None else environ
    from_file = _read_file(config_file) if config_file is not None else {}
    values: dict[str, Any] = {}
    sources: set[str] = set()  # the options given (not defaulted)
    for option in OPTIONS:
        if flags.get(option.name) is not None:
            raw, source = flags[option.name], f"--{option.name.replace('_', '-')}"
        elif option.env in environ:
            raw, source = environ[option.env], option.env
        elif option.name in from_file:
            raw, source = from_file[option.name], f"{config_file}: {option.name}"
        else:
            values[option.name] = option.default()
            continue
        try:
            values[option.name] = option.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{source}: {raw!r} {exc}") from None
        sources.add(option.name)
    if values["readonly"]:
        log.warning("--readonly is deprecated and will be removed: use --follower (this node runs as a follower of the store)")
        values["follower"] = True
    config = Config(**values)
    if config.follower:
        _check_follower(config, explicit=sources)
    else:
        config.store_config()  # surface unsafe raft settings now, not at start-up
    if config.fwd_mode == "routing" and (config.datapath != "ovs" or len(config.vlan_uplinks) != 1):
        raise ConfigError(
            f"--fwd-mode routing: needs --datapath ovs and exactly one --vlan-uplinks interface (the link to the BGP router), got {list(config.vlan_uplinks)}"
        )
    if not config.cluster_secret and (config.peers or config.follower):
        raise ConfigError(
            "--peers/--follower: a node of a cluster needs --cluster-secret, the same on every node (it authenticates and encrypts "
            "Raft; without one, any local user could join the store)"
        )
    for flag, listen in (("--api-listen", config.api_listen), ("--agent-listen", config.agent_listen)):
        if not config.cluster_secret and not is_loopback(listen.rpartition(":")[0].strip("[]")):
            raise ConfigError(f"{flag} {listen}: refusing a non-loopback API without a cluster secret (node-to-node calls are authenticated with it)")
    _check_tls(config)
    return config


def _check_follower(config: Config, explicit: set[str]) -> None:
    """A follower is no Raft member: it needs the voters and the secret, and takes no Raft
    address of its own (an explicit one means the node was meant to be a voter)."""
    if "raft_listen" in explicit and not config.readonly:  # --readonly nodes had one: the alias ignores it
        raise ConfigError(
            f"--follower with --raft-listen {config.raft_listen}: a follower is not a Raft member and listens on no Raft address "
            "(drop --raft-listen, or drop --follower to run a voter)"
        )
    if not config.peers:
        raise ConfigError("--follower needs --peers: the Raft addresses of the voters it follows (comma-separated)")
    if not config.cluster_secret:
        raise ConfigError("--follower needs --cluster-secret, the same on every node (it authenticates and encrypts the stream from the voters)")
    config.follower_config()


def _check_tls(config: Config) -> None:
    given = [name for name in ("tls_cert", "tls_key", "tls_ca") if getattr(config, name) is not None]
    if given and len(given) != 3:
        missing = sorted({"tls_cert", "tls_key", "tls_ca"} - set(given))
        raise ConfigError(f"--tls-cert, --tls-key and --tls-ca go together: {', '.join('--' + m.replace('_', '-') for m in missing)} missing")
    if config.uses_tls and not given and not config.cluster_secret:
        raise ConfigError("--tls always without --tls-cert/--tls-key/--tls-ca needs a cluster secret (it seals the cluster CA's key in the store)")
