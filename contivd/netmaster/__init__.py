"""The netmaster: Contiv's control plane on the replicated store.

Pure planning (`ipam`, `resources`, `plans`) decides what to write; `service.Netmaster` reads
the store, runs the plans and commits each as one guarded transaction. Only the Raft leader
executes writes; the API layer forwards to it.
"""
