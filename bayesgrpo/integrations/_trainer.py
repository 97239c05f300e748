"""What the callback needs from a running ``transformers.Trainer``: the callback handler calling the current
event, rank 0's value on every rank, and the trained model's metadata (its name and size)."""

from __future__ import annotations

import logging
import sys
from types import FrameType

from transformers.trainer_callback import CallbackHandler

log = logging.getLogger("bayesgrpo")


def _find_handler(depth: int = 8):
    """The ``CallbackHandler`` calling the current event (found on the call stack), or None."""
    f: FrameType | None = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return None
        obj = f.f_locals.get("self")
        if isinstance(obj, CallbackHandler):
            return obj
        f = f.f_back
    return None


def _broadcast(obj):
    """``obj`` of rank 0 on every rank (identity when not distributed)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return obj
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _model_meta(model) -> dict:
    out = {}
    cfg = getattr(model, "config", None)
    name = getattr(cfg, "_name_or_path", None) or getattr(cfg, "model_type", None)
    if isinstance(name, str) and name:
        out["model"] = name
    try:
        n = sum(p.numel() for p in model.parameters())
        if n > 0:
            out["params_b"] = n / 1e9
    except (AttributeError, TypeError, RuntimeError) as e:
        log.debug("bayesgrpo: could not count the model's parameters (%s)", e)
    return out
