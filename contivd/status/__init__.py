"""The web status page: a read-only view of the cluster served on the API listener."""
