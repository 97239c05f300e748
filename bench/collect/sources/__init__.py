"""One module per public repository: ``SOURCE`` (its provenance) and ``runs()`` (parsed long table + meta)."""
