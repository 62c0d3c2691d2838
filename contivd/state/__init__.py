"""contivd.state: the one owner of the store's layout (`keys`) and format (`records`), and the
typed snapshot of it every node reader uses (`snapshot`). Nothing else spells a key or parses a
stored value: contivd's own records (`tokens`, `audit`, `ca`, `families`) are read and written
by id through their `stored.Family`; the netmaster reads and writes Contiv's records through
`tables`."""

from . import keys as keys
from . import tables as tables
from .records import EndpointGroupState as EndpointGroupState
from .records import EndpointState as EndpointState
from .records import EpgPolicyState as EpgPolicyState
from .records import GlobalConfigState as GlobalConfigState
from .records import GlobalState as GlobalState
from .records import KubeBackend as KubeBackend
from .records import KubeServicePort as KubeServicePort
from .records import KubeServiceState as KubeServiceState
from .records import NetworkState as NetworkState
from .records import NodeRecord as NodeRecord
from .records import Provider as Provider
from .records import RecordError as RecordError
from .records import RuleMap as RuleMap
from .records import ServiceLBState as ServiceLBState
from .records import ServiceProvidersState as ServiceProvidersState
from .records import TagsState as TagsState
from .snapshot import Change as Change
from .snapshot import StateCache as StateCache
from .snapshot import StateSnapshot as StateSnapshot
