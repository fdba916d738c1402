"""What the LLM stages share: ``service`` (provider, model and prompt version per stage, cache,
usage) and ``prompts`` (the versioned templates under ``prompts/``)."""
