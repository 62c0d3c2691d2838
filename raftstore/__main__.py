"""`python -m raftstore serve …`: the store's own debug entry point (see _serve.py)."""

from ._cli import main

main()
