"""Helpers the tests share: HTTP servers, the oracles of vLLM's examples, a stand-in vLLM, CLI
runners."""
