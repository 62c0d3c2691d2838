"""Open vSwitch for the node agent: contivd's own supervised OVS daemons (`managed`) and the
OVSDB bridge/port interface (`bridge`). See docs/ovs.md."""

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
from .errors import OvsError as OvsError
from .managed import SYSTEM_RUN_DIR as SYSTEM_RUN_DIR
from .managed import DaemonStatistics as DaemonStatistics
from .managed import ManagedOvs as ManagedOvs
from .managed import ManagedOvsStatistics as ManagedOvsStatistics
from .managed import kernel_datapath_available as kernel_datapath_available
from .managed import system_db_socket as system_db_socket
