"""verl's plugin entry point (``verl.plugins``: ``bayesgrpo``, loaded by ``import verl`` in verl >= 0.9): importing
this module registers the ``bayesgrpo`` tracking backend (:func:`bayesgrpo.integrations.verl.register`), so that
``trainer.logger`` accepts ``"bayesgrpo"`` with no change to the training script."""

from __future__ import annotations

from bayesgrpo.integrations.verl import register

register()
