"""Where the real log fixtures of ``../shared/data`` are (or ``$BAYESGRPO_SHARED``), for the tests that read them
and skip without them (a clone outside this layout has none)."""

from __future__ import annotations

import os
from pathlib import Path


def shared_data() -> Path | None:
    """``../shared/data`` beside the repository, else ``$BAYESGRPO_SHARED``, when it holds ``log-formats/``."""
    cands = [Path(__file__).resolve().parents[2] / "shared" / "data"]
    if os.environ.get("BAYESGRPO_SHARED"):
        cands.append(Path(os.environ["BAYESGRPO_SHARED"]))
    return next((c for c in cands if (c / "log-formats").is_dir()), None)
