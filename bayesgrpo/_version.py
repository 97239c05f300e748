"""The package version, defined once (``pyproject.toml`` reads it; every module below the public API
imports it from here, never from the top-level package)."""

__version__ = "0.1.0"
