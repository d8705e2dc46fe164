"""The mmrun command line: main.py wires one module per command group."""
