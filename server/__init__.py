"""memlane's outer layer: the MCP server, auth, the CLI, the memory browser, benchmarks, settings."""
