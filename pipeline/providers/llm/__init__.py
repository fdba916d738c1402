"""LLM providers: the interface (``base``) and one module per API (``anthropic``, ``openai``)."""
