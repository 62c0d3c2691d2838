"""TLS for contivd's listeners: the cluster CA and node certificates (`pki`), the CA's record
in the store and the node's files on disk (`material`), fingerprints (`fingerprint`, standard
library only, so `contivd ctl` can pin one without the daemon's dependencies)."""
