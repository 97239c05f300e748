"""Hierarchical comparison of model families and group sizes (physics.md section 8 predictions)."""

from bayesgrpo.compare.model import *  # noqa: F403
from bayesgrpo.compare.model import __all__  # noqa: F401
