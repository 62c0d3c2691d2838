"""What the snapshot route and its client share: the path (the body is raftstore's backup format)."""

SNAPSHOT_PATH = "/contivd/snapshot"
