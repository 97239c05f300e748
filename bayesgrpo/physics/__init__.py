"""The physics of a GRPO reward curve that the forecasts use, in pure numpy (physics.md sections 2, 4, 8).

:mod:`bayesgrpo.physics.dynamics` holds recursion (1)'s companion matrix;
:mod:`bayesgrpo.physics.stability` exact stability, per draw;
:mod:`bayesgrpo.physics.stopping` the one definition of the stop step.
The simulator, closed forms, thresholds and stationary variance no command uses are in
``bench/physics_reference.py``.
"""

from bayesgrpo.physics.dynamics import *  # noqa: F403
from bayesgrpo.physics.dynamics import __all__ as _dyn_all
from bayesgrpo.physics.stability import *  # noqa: F403
from bayesgrpo.physics.stability import __all__ as _stab_all

__all__ = [*_dyn_all, *_stab_all]
