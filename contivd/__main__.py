"""`python -m contivd …` — the same as the `contivd` executable."""

from .cli import main

main()
