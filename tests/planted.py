"""A planted package for the architecture checks' self-tests: files written under ``tmp_path/pkg``."""

from __future__ import annotations

from pathlib import Path


def planted_package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``tmp_path / "pkg"`` and return that root."""
    root = tmp_path / "pkg"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root
