"""The physics of a GRPO reward curve in pure numpy (physics.md sections 2-5, 8).

:mod:`bayesgrpo.physics.dynamics` holds recursion (1), its closed forms and coefficients;
:mod:`bayesgrpo.physics.stability` exact stability, thresholds and the stationary variance;
:mod:`bayesgrpo.physics.stopping` the one definition of the stop step.
"""

from bayesgrpo.physics.dynamics import *  # noqa: F403
from bayesgrpo.physics.dynamics import __all__ as _dyn_all
from bayesgrpo.physics.stability import *  # noqa: F403
from bayesgrpo.physics.stability import __all__ as _stab_all

__all__ = [*_dyn_all, *_stab_all]
