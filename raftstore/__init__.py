"""raftstore: the replicated key-value store every contivd embeds instead of etcd.

Built on PySyncObj. Imports nothing from contivd. Start a member with `open_store(config)`;
the yielded `Store` offers get/list/put/delete/txn, watches, leases and leadership.
`MemoryStore` offers the same `KeyValueStore` surface in-process, for tests.
"""

# First: it keeps PySyncObj's Windows inet_ntop shim from replacing socket.inet_ntop process-wide.
from . import _pysyncobj_compat  # noqa: F401
from ._config import StoreConfig as StoreConfig
from ._config import is_loopback as is_loopback
from ._errors import InvalidKeyError as InvalidKeyError
from ._errors import InvalidValueError as InvalidValueError
from ._errors import LeaseNotFoundError as LeaseNotFoundError
from ._errors import StoreClosedError as StoreClosedError
from ._errors import StoreConfigError as StoreConfigError
from ._errors import StoreError as StoreError
from ._errors import UnavailableError as UnavailableError
from ._protocol import KeyValueStore as KeyValueStore
from ._store import Store as Store
from ._store import open_store as open_store
from ._types import Compare as Compare
from ._types import Delete as Delete
from ._types import DeletePrefix as DeletePrefix
from ._types import Event as Event
from ._types import EventType as EventType
from ._types import KeyValue as KeyValue
from ._types import LeadershipChange as LeadershipChange
from ._types import Op as Op
from ._types import Put as Put
from ._types import StoreStatistics as StoreStatistics
from ._types import TxnResult as TxnResult
from ._types import absent as absent
from ._types import mod_revision_is as mod_revision_is
from ._types import value_is as value_is
from .memory import MemoryStore as MemoryStore
