"""The physics of a GRPO reward curve in pure numpy (physics.md sections 2-5, 8).

:mod:`bayesgrpo.physics.dynamics` holds recursion (1), its closed forms, coefficients, exact stability
and thresholds; :mod:`bayesgrpo.physics.stopping` the one definition of the stop step.
"""

from bayesgrpo.physics.dynamics import *  # noqa: F401,F403
from bayesgrpo.physics.dynamics import __all__ as _dyn_all

__all__ = list(_dyn_all)
