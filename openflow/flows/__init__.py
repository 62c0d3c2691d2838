"""One module per datapath feature; each exposes pure ``flows(tables, inputs) -> list[Flow]``
(and ``groups(inputs) -> list[Group]`` where it owns groups), deterministic and sorted."""
