"""Versioned prompt templates: prompts/<name>/v<N>.md, read with importlib.resources."""
