"""The ``bayesgrpo`` command line."""

from bayesgrpo.cli.app import app

__all__ = ["app"]
