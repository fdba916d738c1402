"""Benchmarks behind ``memlane bench``: LoCoMo retrieval quality (``locomo``), write throughput and
recall latency against their floors (``latency``), and MCP start-up and call latency (``mcpbench``).
``report`` renders their JSON as Markdown tables and PNG charts."""
