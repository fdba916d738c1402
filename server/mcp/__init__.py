"""The MCP server: tools and resources (``app``), their result models, transports (``serve``) and
MCP sampling as an LLM provider."""
