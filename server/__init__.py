"""memlane MCP layer: tools, resources, transports, CLI, settings."""
