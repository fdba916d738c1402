"""Who may call: HTTP bearer tokens (``http``), the token store (``token_store``) and which
projects a principal reads (``projects``)."""
