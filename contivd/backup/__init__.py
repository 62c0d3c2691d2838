"""Backup, restore and quorum-loss recovery of the embedded store (docs/operations.md, "Backup,
restore and recovery"): the leader's snapshot route, the CLI that saves it, and the offline
steps that seed a new single-voter cluster from a backup or from one surviving member."""

from .offline import recover_member as recover_member
from .offline import restore_backup as restore_backup
from .route import SNAPSHOT_PATH as SNAPSHOT_PATH
from .route import SnapshotContext as SnapshotContext
from .route import register_snapshot_route as register_snapshot_route
from .save import SnapshotSaveError as SnapshotSaveError
from .save import save_snapshot as save_snapshot
