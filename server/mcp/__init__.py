"""The MCP server: ``app`` assembles it from the tools (``tools``, their parameters in ``params``)
and resources (``resources``) over the shared ``state``; result models (``models``), transports
(``serve``) and MCP sampling as an LLM provider (``sampling``)."""
