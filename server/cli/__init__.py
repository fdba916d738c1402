"""The ``memlane`` command: ``main`` (the parser and dispatch), ``commands`` (one function per
subcommand), ``bench`` (``memlane bench``)."""
