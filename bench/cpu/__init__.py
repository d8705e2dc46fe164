"""The CPU benchmark behind ``make bench``: it writes the CPU section of docs/performance.md.

Run from the repository root: ``python -m bench.cpu`` (``--quick`` for fewer repetitions
while developing; ``--only NAME`` runs some figures and writes nothing under docs/).
"""
