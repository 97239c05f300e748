"""Failure-mode diagnostics: reward hacking, advantage degeneracy, policy concentration, instability."""

from bayesgrpo.diagnose.failure_modes import *  # noqa: F403
from bayesgrpo.diagnose.failure_modes import __all__  # noqa: F401
