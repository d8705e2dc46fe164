"""Why openPangu-VL has no tiny checkpoint (see tests/tiny/__init__.py)."""

from __future__ import annotations

UNPROVEN: dict[tuple[str, str], str] = {
    # Stand-in classes would not help: vLLM's OpenPanguVisionTransformer refuses every ViT
    # attention backend but FLASH_ATTN when it is built, and the CPU platform offers only
    # TORCH_SDPA (an mm_encoder_attn_backend of FLASH_ATTN fails the platform's check).
    ("image", "openpangu_vl"): "fails on vLLM 0.32's CPU backend: its vision tower takes only "
    "the FLASH_ATTN attention backend, the CPU platform only TORCH_SDPA ('Pangu-VL does not "
    "support AttentionBackendEnum.TORCH_SDPA backend now'); its config, processor and "
    "tokenizer classes are also remote code",
}
