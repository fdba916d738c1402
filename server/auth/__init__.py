"""Who may call: HTTP bearer tokens (``http``), the token store (``token_store``) and which
projects ``project="*"`` names (``projects``); ``pipeline/access.py`` decides who reads what."""
