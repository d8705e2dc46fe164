"""Stand-in remote code that tiny checkpoints carry where a model's own classes exist only
in its Hub repository (``trust_remote_code``). Written by this project from the published
config fields that vLLM reads, NOT copied from the model repositories: a checkpoint built with
one proves vLLM's engine path, processor and placeholder expansion, not the original classes.

Each sub-folder holds the files a builder copies next to config.json (``auto_map`` names them).
They import transformers at module level, as remote code does, and are never imported by mmrun.
"""
