"""The one exception family raftstore raises: callers catch StoreError at the boundary."""


class StoreError(Exception):
    """Base of every error raftstore raises on purpose."""


class JournalDamagedError(StoreError):
    """A member's Raft files lost or garbled entries; the message names the file and the fault.
    Here, not beside the check (_journal_check, which reads PySyncObj's format): `contivd run`
    catches it on every node, followers included, which never load PySyncObj."""


class StoreConfigError(StoreError, ValueError):
    """The store configuration is unusable (unsafe listen address, bad peer, missing data dir …)."""


class InvalidKeyError(StoreError, ValueError):
    """A key or prefix lies outside the store's `/segment/segment` hierarchy."""


class InvalidValueError(StoreError, ValueError):
    """A value cannot be stored: not JSON-serialisable or too large."""


class UnavailableError(StoreError):
    """No leader or no quorum answered within the request timeout.

    For a write the outcome may be unknown: it can still commit later. Every write carries a
    request id that the state machine deduplicates, so retrying the same call is safe.
    """


class LeaseNotFoundError(StoreError):
    """The lease does not exist (never granted, revoked, or already expired)."""


class StoreClosedError(StoreError):
    """The store was closed while the call was waiting."""
