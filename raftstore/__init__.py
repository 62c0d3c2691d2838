"""raftstore: the replicated key-value store every contivd embeds instead of etcd.

Built on PySyncObj. Imports nothing from contivd. Start a member with `open_store(config)`;
the yielded `Store` offers get/list/put/delete/txn, watches, leases and leadership.
A node that is not a voter follows the store with `open_follower(FollowerConfig(...))`.
`MemoryStore` offers the same `KeyValueStore` surface in-process, for tests.

What needs PySyncObj (`Store`, `open_store`, the data-dir tools) is imported on first use,
so a follower of the store never loads it.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# First: keeps PySyncObj's Windows inet_ntop shim from replacing socket.inet_ntop process-wide.
from . import _inet_shim  # noqa: F401
from ._backup import BackupFileError as BackupFileError
from ._backup import BackupHeader as BackupHeader
from ._backup import decode_backup as decode_backup
from ._backup import encode_image as encode_image
from ._backup import read_backup_file as read_backup_file
from ._config import FollowerConfig as FollowerConfig
from ._config import StoreConfig as StoreConfig
from ._config import is_loopback as is_loopback
from ._config import parse_address as parse_address
from ._disk_space import DataDirFullError as DataDirFullError
from ._errors import InvalidKeyError as InvalidKeyError
from ._errors import InvalidValueError as InvalidValueError
from ._errors import JournalDamagedError as JournalDamagedError
from ._errors import LeaseNotFoundError as LeaseNotFoundError
from ._errors import StoreClosedError as StoreClosedError
from ._errors import StoreConfigError as StoreConfigError
from ._errors import StoreError as StoreError
from ._errors import UnavailableError as UnavailableError
from ._follower import FollowerStore as FollowerStore
from ._follower import open_follower as open_follower
from ._image import KeyRecord as KeyRecord
from ._image import LeaseRecord as LeaseRecord
from ._image import StoreImage as StoreImage
from ._protocol import KeyValueStore as KeyValueStore
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

if TYPE_CHECKING:
    from ._seed import Recovered as Recovered
    from ._seed import move_aside as move_aside
    from ._seed import new_cluster_id as new_cluster_id
    from ._seed import recover_image as recover_image
    from ._seed import refuse_non_empty as refuse_non_empty
    from ._seed import seed_data_dir as seed_data_dir
    from ._store import Store as Store
    from ._store import open_store as open_store

_ON_PYSYNCOBJ = {
    **dict.fromkeys(["Recovered", "move_aside", "new_cluster_id", "recover_image", "refuse_non_empty", "seed_data_dir"], "._seed"),
    **dict.fromkeys(["Store", "open_store"], "._store"),
}


def __getattr__(name: str) -> Any:
    """Load what needs PySyncObj on first use (module __getattr__, PEP 562)."""
    module = _ON_PYSYNCOBJ.get(name)
    if module is None:
        raise AttributeError(f"module 'raftstore' has no attribute {name!r}")
    import_module("._pysyncobj_compat", __name__)  # its checks and patches before any use
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
