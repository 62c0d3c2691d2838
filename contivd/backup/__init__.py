"""Backup, restore and quorum-loss recovery of the embedded store (docs/operations.md, "Backup,
restore and recovery"): the leader's snapshot route (`route`), the CLI that saves it (`save`,
`commands`), and the offline steps that seed a new single-voter cluster from a backup or from
one surviving member (`offline`).

Nothing is re-exported here: `contivd.cli` imports `commands` on every invocation, which must
not pull in the HTTP server (Quart) that only `route` needs.
"""
