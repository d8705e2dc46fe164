"""Helpers the tests share: HTTP servers, the seed oracle, a stand-in vLLM, CLI runners."""
