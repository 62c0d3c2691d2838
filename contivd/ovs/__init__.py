"""Open vSwitch for the node agent: contivd's own supervised OVS daemons (`managed`) and the
OVSDB bridge/port interface (`bridge`). See docs/ovs.md.

The OVSDB interface (`bridge`: ovsdbapp, which pulls in eventlet) loads on first use of one of
its names (PEP 562): `contivd run` catches OvsError on every node, and a node without the OVS
datapath must not carry ovsdbapp for it.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import OvsError as OvsError
from .managed import SYSTEM_RUN_DIR as SYSTEM_RUN_DIR
from .managed import DaemonStatistics as DaemonStatistics
from .managed import ManagedOvs as ManagedOvs
from .managed import ManagedOvsStatistics as ManagedOvsStatistics
from .managed import kernel_datapath_available as kernel_datapath_available
from .managed import system_db_socket as system_db_socket

if TYPE_CHECKING:
    from .bridge import VLAN_BRIDGE as VLAN_BRIDGE
    from .bridge import VXLAN_BRIDGE as VXLAN_BRIDGE
    from .bridge import BridgeSpec as BridgeSpec
    from .bridge import BridgeStatistics as BridgeStatistics
    from .bridge import OvsBridge as OvsBridge
    from .bridge import Ovsdb as Ovsdb
    from .bridge import OvsdbappBridge as OvsdbappBridge
    from .bridge import PortInfo as PortInfo
    from .bridge import PortKind as PortKind
    from .bridge import PortSpec as PortSpec
    from .bridge import open_ovsdb as open_ovsdb

_OVSDB = frozenset(
    [
        "VLAN_BRIDGE",
        "VXLAN_BRIDGE",
        "BridgeSpec",
        "BridgeStatistics",
        "OvsBridge",
        "Ovsdb",
        "OvsdbappBridge",
        "PortInfo",
        "PortKind",
        "PortSpec",
        "open_ovsdb",
    ]
)


def __getattr__(name: str) -> Any:
    """Load the OVSDB interface on first use."""
    if name not in _OVSDB:
        raise AttributeError(f"module 'contivd.ovs' has no attribute {name!r}")
    value = getattr(import_module(".bridge", __name__), name)
    globals()[name] = value
    return value
