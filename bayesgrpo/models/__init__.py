"""The model stack: prepared arrays -> PyMC graph (shared components) -> likelihood kernels.

* :mod:`~bayesgrpo.models.arrays` -- RunSet -> :class:`ModelArrays` (grid, mask, normalisation, noise estimate)
* :mod:`~bayesgrpo.models.prior` -- :class:`PopulationPrior` (the packaged population prior)
* :mod:`~bayesgrpo.models.components` -- per-run effects, momentum prior, likelihood (used by every graph)
* :mod:`~bayesgrpo.models.kinds` -- the registry of model kinds and :func:`build_model`
* :mod:`~bayesgrpo.models.kalman` / :mod:`~bayesgrpo.models.kalman_op` -- numpy reference filter, compiled Ops
"""

from bayesgrpo.models.arrays import ModelArrays
from bayesgrpo.models.kinds import MODEL_KINDS, build_model

__all__ = ["MODEL_KINDS", "ModelArrays", "build_model"]
