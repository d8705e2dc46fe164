"""mmrun's version: one source, read by pyproject.toml, the output files and ``--version``."""

__version__ = "0.2.0"
