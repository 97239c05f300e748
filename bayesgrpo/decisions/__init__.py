"""Stop / budget decisions from posterior reward paths."""

from bayesgrpo.decisions.budget import *  # noqa: F403
from bayesgrpo.decisions.budget import __all__  # noqa: F401
