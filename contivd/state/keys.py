"""The store's key layout: Contiv's `/contiv.io/...` hierarchy (contiv-api.md §6). The only place keys are spelled."""

from __future__ import annotations

ROOT = "/contiv.io"
MODEL_PREFIX = f"{ROOT}/obj/modeldb/"
# Bumped by every configuration write: config transactions compare it, so two writers that
# read the same configuration cannot both commit (serialisable config changes).
CONFIG_VERSION = f"{ROOT}/obj/version"
NETS_PREFIX = f"{ROOT}/state/nets/"
EPS_PREFIX = f"{ROOT}/state/eps/"
EPGS_PREFIX = f"{ROOT}/state/endpointGroups/"
POLICY_PREFIX = f"{ROOT}/state/policy/"
POLICY_RULE_PREFIX = f"{ROOT}/state/policyRule/"
SERVICE_LB_PREFIX = f"{ROOT}/state/serviceLB/"
PROVIDER_PREFIX = f"{ROOT}/state/provider/"
GLOBAL_CONFIG = f"{ROOT}/master/config/global"
GLOBAL_STATE = f"{ROOT}/state/global/global"
TAGS_STATE = f"{ROOT}/state/tags/global"  # VLAN, VXLAN, local VLAN and EPG id bitsets
NODES_PREFIX = f"{ROOT}/nodes/"
# Kubernetes mode: what the leader's watch of the API server resolved (not Contiv's layout).
K8S_SERVICES_PREFIX = f"{ROOT}/k8s/services/"
K8S_NETPOL_PREFIX = f"{ROOT}/k8s/netpol/"  # compiled NetworkPolicy rules, per pod
# TLS: the cluster CA (certificate, and its key sealed with the cluster secret); not Contiv's layout.
TLS_CA = f"{ROOT}/tls/ca"


def model(kind: str, key: str) -> str:
    return f"{MODEL_PREFIX}{kind}/{key}"


def model_prefix(kind: str) -> str:
    return f"{MODEL_PREFIX}{kind}/"


def net_id(tenant: str, network: str) -> str:
    """Contiv's network id `<net>.<tenant>`."""
    return f"{network}.{tenant}"


def net_state(tenant: str, network: str) -> str:
    return f"{NETS_PREFIX}{net_id(tenant, network)}"


def ep_id(tenant: str, network: str, endpoint: str) -> str:
    """Contiv's endpoint id `<net>.<tenant>-<endpointID>`."""
    return f"{net_id(tenant, network)}-{endpoint}"


def ep_state(endpoint_id: str) -> str:
    return f"{EPS_PREFIX}{endpoint_id}"


def epg_state(tenant: str, group: str) -> str:
    return f"{EPGS_PREFIX}{group}:{tenant}"


def k8s_service(namespace: str, name: str) -> str:
    """A Kubernetes Service, `<namespace>/<name>` under K8S_SERVICES_PREFIX."""
    return f"{K8S_SERVICES_PREFIX}{namespace}/{name}"


def k8s_netpol(pod: str) -> str:
    """The compiled NetworkPolicy rules of pod `<namespace>/<name>`."""
    return f"{K8S_NETPOL_PREFIX}{pod}"


def node(name: str) -> str:
    return f"{NODES_PREFIX}{name}"


# Access control and the audit trail: contivd's own, outside Contiv's tree (an import of a Contiv
# tree neither sees nor replaces them).
TOKENS_PREFIX = "/contivd/auth/tokens/"
AUDIT_PREFIX = "/contivd/audit/"
