"""Configuration: flags > CONTIVD_* environment > TOML file > defaults, and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from contivd.cli import cli
from contivd.config import ConfigError, load


def test_precedence_flag_over_env_over_file(tmp_path: Path) -> None:
    file = tmp_path / "contivd.toml"
    file.write_text('node_name = "from-file"\ndata_dir = "/srv/contivd"\nlog_level = "debug"\n')
    config = load({"node_name": "from-flag"}, file, {"CONTIVD_DATA_DIR": "/from/env"})
    assert config.node_name == "from-flag"
    assert str(config.data_dir) == "/from/env"
    assert config.log_level == "DEBUG"
    assert config.api_listen == "127.0.0.1:9999" and config.peers == ()


@pytest.mark.parametrize(
    "flags, env, problem",
    [
        ({"api_listen": "0.0.0.0:9999"}, {}, "non-loopback API without a cluster secret"),
        ({"raft_listen": "198.18.0.1:9002"}, {}, "without a cluster secret"),
        ({"api_listen": "127.0.0.1"}, {}, "--api-listen"),
        ({}, {"CONTIVD_READONLY": "maybe"}, "CONTIVD_READONLY: 'maybe' must be true or false"),
        ({"log_level": "loud"}, {}, "--log-level"),
        ({"control_ip": "not-an-ip"}, {}, "--control-ip"),
        ({"audit_interval": "0.5"}, {}, "--audit-interval: '0.5' must be between 2 seconds and one day"),
        ({}, {"CONTIVD_AUDIT_INTERVAL": "often"}, "CONTIVD_AUDIT_INTERVAL: 'often' must be a number of seconds"),
        ({"datapath": "gre"}, {}, "must be ovs or none"),
        ({"ovs": "/run/openvswitch/db.sock"}, {}, "OVSDB target"),
        ({"peers": "127.0.0.1:9002", "raft_listen": "127.0.0.1:9002"}, {}, "listed twice"),
        ({"agent_listen": "198.18.0.1:9090"}, {}, "--agent-listen 198.18.0.1:9090: refusing a non-loopback API"),
        ({"net_mode": "gre"}, {}, "--net-mode: 'gre' must be one of vxlan, vlan"),
        ({"fwd_mode": "routing"}, {}, "--fwd-mode routing: needs --datapath ovs and exactly one --vlan-uplinks interface"),
        ({"fwd_mode": "routing", "vlan_uplinks": "eth1,eth2"}, {}, "exactly one --vlan-uplinks"),
        ({"fwd_mode": "switching"}, {}, "--fwd-mode: 'switching' must be one of bridge, routing"),
        ({}, {"CONTIVD_VLAN_UPLINKS": "eth0,a-very-long-interface-name"}, "not a network interface name"),
        ({"openflow_listen": "198.18.0.1:6653"}, {}, "--openflow-listen: '198.18.0.1:6653' must be a unix socket path or a loopback host:port"),
        ({"openflow_listen": "/run/" + "x" * 110}, {}, "--openflow-listen: .* at most 107 bytes"),
    ],
)
def test_bad_settings_name_the_option(flags: dict, env: dict, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load(flags, None, env)


def test_bad_files_are_refused(tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('node_nme = "typo"\n')
    with pytest.raises(ConfigError, match="unknown option.*node_nme"):
        load({}, unknown, {})
    broken = tmp_path / "broken.toml"
    broken.write_text("node_name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load({}, broken, {})
    with pytest.raises(ConfigError, match="cannot read config file"):
        load({}, tmp_path / "missing.toml", {})


def test_check_config_prints_effective_values_with_the_secret_masked() -> None:
    result = CliRunner().invoke(cli, ["check-config", "--cluster-secret", "long-enough-secret", "--node-name", "n1"], env={})
    assert result.exit_code == 0, result.output
    assert '"cluster_secret": "********"' in result.output and '"node_name": "n1"' in result.output
    refused = CliRunner().invoke(cli, ["check-config", "--api-listen", "0.0.0.0:1"], env={})
    assert refused.exit_code == 2 and "cluster secret" in refused.output


def test_agent_options_parse() -> None:
    config = load({"vlan_uplinks": "eth1, eth2", "net_mode": "VLAN", "agent_listen": "127.0.0.1:9191"}, None, {})
    assert config.vlan_uplinks == ("eth1", "eth2") and config.net_mode == "vlan" and config.fwd_mode == "bridge"
    assert config.agent_url == "http://127.0.0.1:9191"


@pytest.mark.parametrize(
    "given, address",
    [
        (None, Path("contivd/openflow.sock")),  # the default: under the OVS run directory
        ("/var/run/openvswitch/of.sock", Path("/var/run/openvswitch/of.sock")),
        ("127.0.0.1:6653", ("127.0.0.1", 6653)),  # accepted, logged as less safe
        ("[::1]:6653", ("::1", 6653)),
    ],
)
def test_openflow_listen_is_a_unix_socket_or_a_loopback_port(given: str | None, address: Path | tuple[str, int]) -> None:
    assert load({"openflow_listen": given}, None, {}).openflow_address == address


def test_routing_mode_with_one_uplink_is_accepted() -> None:
    config = load({"fwd_mode": "routing", "vlan_uplinks": "eth1"}, None, {})
    assert (config.fwd_mode, config.vlan_uplinks) == ("routing", ("eth1",))


SECRET = "a-cluster-secret"


def test_a_follower_takes_the_voters_from_peers_and_no_raft_address() -> None:
    config = load({"follower": True, "peers": "127.0.0.1:9002,127.0.0.1:9003"}, None, {"CONTIVD_CLUSTER_SECRET": SECRET})
    follower = config.follower_config()
    assert follower.voters == ("127.0.0.1:9002", "127.0.0.1:9003") and follower.name == config.node_name and follower.secret == SECRET
    with pytest.raises(ConfigError, match="a follower of the store is no Raft member"):
        config.store_config()  # restore and recover make voters


def test_readonly_is_a_deprecated_alias_of_follower(caplog: pytest.LogCaptureFixture) -> None:
    env = {"CONTIVD_CLUSTER_SECRET": SECRET, "CONTIVD_READONLY": "true", "CONTIVD_RAFT_LISTEN": "127.0.0.1:9004"}  # as such nodes ran
    config = load({"peers": "127.0.0.1:9002"}, None, env)
    assert config.follower and config.follower_config().voters == ("127.0.0.1:9002",)
    assert "--readonly is deprecated and will be removed: use --follower" in caplog.text


@pytest.mark.parametrize(
    "flags, problem",
    [
        ({"follower": True}, "--follower needs --peers"),
        ({"follower": True, "peers": "127.0.0.1:9002", "raft_listen": "127.0.0.1:9004"}, "a follower is not a Raft member"),
        ({"follower": True, "peers": "127.0.0.1:9002,127.0.0.1:9002"}, "a voter address is listed twice"),
    ],
)
def test_a_follower_without_voters_or_with_a_raft_address_is_refused(flags: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load(flags, None, {"CONTIVD_CLUSTER_SECRET": SECRET})


def test_a_follower_needs_the_cluster_secret() -> None:
    with pytest.raises(ConfigError, match="--follower needs --cluster-secret, the same on every node"):
        load({"follower": True, "peers": "127.0.0.1:9002"}, None, {})
