"""The node agent (Contiv's netplugin): makes the local Open vSwitch match the store.

`inputs.node_inputs` turns store state plus this node's OVS port numbers into the flow
builders' `openflow.NodeInputs` (pure). The I/O service that watches the store, manages
OVS and pushes flow bundles is built on it.
"""
