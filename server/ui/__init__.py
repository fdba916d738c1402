"""The memory browser: a server-rendered web page over the same engine methods as the MCP tools.

``memlane ui`` serves it alone (``run.py``); ``memlane serve --transport http`` mounts it at ``/ui``
when ``[ui] enabled = true``. Nothing is imported here, so the MCP server can import ``metrics``
without loading the web stack.
"""
