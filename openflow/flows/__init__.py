"""One module per datapath feature, built per owner (docs/pipeline.md, "Owners").

Each module exposes pure per-owner builders (``port_flows``, ``remote_flows``, ``network_flows``,
... taking one record and the round or the bridge's :class:`~openflow.inputs.Fabric`) that
:mod:`openflow.owners` composes, plus ``flows(tables, inputs)`` (and ``groups``) composing
them over a whole NodeInputs: the feature's view that the golden tests read.
"""
