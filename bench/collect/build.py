"""Build ``data/grpo-collected`` from the per-source parsers in ``bench/collect/sources``.

    .venv/bin/python -m bench.collect.build                 # every source module
    .venv/bin/python -m bench.collect.build --only owner__name --dry-run   # check one, write nothing

Each module of ``bench/collect/sources`` describes one public repository (``SOURCE``) and parses its
committed files (``runs()``, reading them with :mod:`bench.collect.raw`). This script then, in order:

1. checks every run: finite rewards, unique increasing steps, at least ``MIN_POINTS`` points, a first step
   at training start (at most two logging intervals, or the step the source declares as its start);
2. asks ``../shared/tools/held_out`` about the repository and about every run's curve, and drops what it
   names (already collected, or held out to judge the project);
3. merges exact and near copies (across the collected sources *and* the shared development sets): a
   run whose rewards equal another's on every common step (to 1e-3 of its range) is a copy; a strict
   prefix of a longer copy is dropped, of two equal copies the first source in name order is kept and
   the other places are listed in its ``notes``;
4. writes ``runs.csv`` (long: ``run_id, step, reward`` + every logged channel), ``meta.csv`` (one row per
   run: provenance, configuration, ``source_sha256`` of every file read) and ``README.md`` (a table per
   source with its provenance and caveats) to ``data/grpo-collected``; ``build_log.md`` says what was
   dropped and why.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.collect import raw, sources

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "data" / "grpo-collected"
SHARED = ROOT.parent / "shared"
HELD_OUT = SHARED / "tools" / "held_out"
DEV_SETS = ("grpo-public", "grpo-extra", "grpo-more")
MIN_POINTS = 30
#: meta columns, in order (those of ../shared/data/*/meta.csv, then this set's own)
META_COLUMNS = [
    "run_id", "source_repo", "source_path", "commit", "model", "params_b", "group_size", "learning_rate",
    "batch_size", "dataset", "algorithm", "notes", "n_points", "first_step", "last_step",
    "max_steps", "regime", "source_sha256",
]  # fmt: skip
REGIMES = ("rising", "late-rising", "s-curve", "decline", "collapse", "flat", "noisy", "custom-env", "short")


@dataclass
class Dropped:
    run_id: str
    repo: str
    why: str


def _modules(only: list[str] | None) -> list[str]:
    names = sorted(m.name for m in pkgutil.iter_modules(sources.__path__) if not m.name.startswith("_"))
    return [n for n in names if only is None or n in only]


def _held_out(args: list[str]) -> tuple[int, str]:
    out = subprocess.run([sys.executable, str(HELD_OUT), *args], capture_output=True, text=True, check=False)
    return out.returncode, out.stdout


def _check_run(rid: str, d: pd.DataFrame, start_ok: float | None) -> str | None:
    if d["reward"].isna().any() or not np.isfinite(d["reward"]).all():
        return "non-finite reward"
    s = d["step"].to_numpy(float)
    if len(s) < MIN_POINTS:
        return f"{len(s)} points < {MIN_POINTS}"
    if np.any(np.diff(s) <= 0):
        return "steps not unique and increasing"
    interval = float(np.median(np.diff(s)))
    limit = start_ok if start_ok is not None else max(2.0 * interval, 2.0)
    if s[0] > limit:
        return f"first step {s[0]:g} is not training start (limit {limit:g})"
    return None


def _same(a: pd.Series, b: pd.Series) -> str | None:
    """'equal', 'prefix-a' (a is a strict prefix of b), 'prefix-b' or None: rewards by step."""
    common = a.index.intersection(b.index)
    if len(common) < min(len(a), len(b)) or len(common) < 10:
        return None
    rng = max(float(np.ptp(np.concatenate([a.to_numpy(), b.to_numpy()]))), 1e-9)
    if np.max(np.abs(a.loc[common].to_numpy() - b.loc[common].to_numpy())) > 1e-3 * rng:
        return None
    if len(a) == len(b):
        return "equal"
    return "prefix-a" if len(a) < len(b) else "prefix-b"


def _dev_curves() -> dict[str, pd.Series]:
    out = {}
    for s in DEV_SETS:
        f = SHARED / "data" / s / "runs.csv"
        if f.is_file():
            df = pd.read_csv(f, usecols=["run_id", "step", "reward"]).dropna()
            for rid, g in df.groupby("run_id", sort=False):
                out[f"{s}:{rid}"] = g.set_index("step")["reward"].sort_index()
    return out


def collect(only: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, list[Dropped], dict]:
    datas, metas, dropped, docs = [], [], [], {}
    for name in _modules(only):
        mod = importlib.import_module(f"bench.collect.sources.{name}")
        src = mod.SOURCE
        repo = src["repo"]
        rc, said = _held_out(["repo", repo])
        if rc != 0:
            dropped.append(Dropped("*", repo, f"held_out repo: {said.strip()}"))
            continue
        raw.READ.clear()
        try:
            data, meta = mod.runs()
        except raw.RawMissing as e:
            dropped.append(Dropped("*", repo, f"raw file missing: {e}"))
            continue
        meta = meta.copy()
        meta["source_repo"] = repo
        shas = {p: h for (r, _c, p), h in raw.READ.items() if r == repo}
        for rid, g in data.groupby("run_id", sort=False):
            g = g.sort_values("step")
            why = _check_run(rid, g, src.get("start_step"))
            if why:
                dropped.append(Dropped(rid, repo, why))
                data = data[data["run_id"] != rid]
                meta = meta[meta["run_id"] != rid]
        paths = meta.get("source_path", pd.Series(dtype=str)).astype(str)
        meta["source_sha256"] = [";".join(shas[p][:16] for p in str(sp).split(";") if p in shas) for sp in paths]
        docs[repo] = src
        datas.append(data)
        metas.append(meta)
    if not datas:
        return pd.DataFrame(), pd.DataFrame(columns=META_COLUMNS), dropped, docs
    data = pd.concat(datas, ignore_index=True)
    meta = pd.concat(metas, ignore_index=True)
    dup = meta["run_id"].duplicated()
    if dup.any():
        raise SystemExit(f"run ids used twice: {sorted(meta.loc[dup, 'run_id'])}")

    # the held-out curves
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        data[["run_id", "step", "reward"]].to_csv(f, index=False)
    _rc, said = _held_out(["run", f.name])
    Path(f.name).unlink()
    for line in said.splitlines():
        rid, _, verdict = line.partition("\t")
        if verdict.startswith("skip"):
            dropped.append(Dropped(rid, meta.set_index("run_id").loc[rid, "source_repo"], f"held_out run: {verdict}"))
    keep = {r for r in meta["run_id"] if r not in {d.run_id for d in dropped}}

    # copies: against the shared development sets, then among the collected runs
    curves = {rid: g.set_index("step")["reward"].sort_index() for rid, g in data.groupby("run_id", sort=False)}
    dev = _dev_curves()
    for rid in sorted(keep):
        for did, dc in dev.items():
            rel = _same(curves[rid], dc)
            if rel in ("equal", "prefix-a"):
                dropped.append(Dropped(rid, "", f"copy of development run {did} ({rel})"))
                keep.discard(rid)
                break
    order = meta.set_index("run_id")["source_repo"].to_dict()
    ids = sorted(keep, key=lambda r: (order[r], r))
    also: dict[str, list[str]] = {}
    for i, a in enumerate(ids):
        if a not in keep:
            continue
        for b in ids[i + 1 :]:
            if b not in keep:
                continue
            rel = _same(curves[a], curves[b])
            if rel is None:
                continue
            loser, winner = (a, b) if rel == "prefix-a" else (b, a)
            keep.discard(loser)
            also.setdefault(winner, []).append(f"{order[loser]}:{loser}")
            dropped.append(Dropped(loser, order[loser], f"{rel} copy of {winner}"))
            if loser == a:
                break
    meta = meta[meta["run_id"].isin(keep)].copy()
    data = data[data["run_id"].isin(keep)].copy()
    for w, places in also.items():
        m = meta["run_id"] == w
        meta.loc[m, "notes"] = meta.loc[m, "notes"].fillna("").astype(str) + f"; same curve also at {', '.join(places)}"
    stats = data.groupby("run_id")["step"].agg(["count", "min", "max"])
    meta["n_points"] = meta["run_id"].map(stats["count"])
    meta["first_step"] = meta["run_id"].map(stats["min"])
    meta["last_step"] = meta["run_id"].map(stats["max"])
    for c in META_COLUMNS:
        if c not in meta.columns:
            meta[c] = np.nan
    bad = set(meta["regime"].dropna().astype(str).str.split(",").explode().str.strip()) - set(REGIMES)
    if bad:
        raise SystemExit(f"unknown regime tag(s) {sorted(bad)}; use {REGIMES}")
    meta = meta[META_COLUMNS + [c for c in meta.columns if c not in META_COLUMNS]]
    front = ["run_id", "step", "reward"]
    data = data[front + sorted(c for c in data.columns if c not in front)]
    data = data.dropna(axis=1, how="all")
    return data, meta, dropped, docs


def _readme(data: pd.DataFrame, meta: pd.DataFrame, docs: dict) -> str:
    n_src = meta["source_repo"].nunique()
    lines = [
        f"# grpo-collected — {len(meta)} real GRPO-family training logs from {n_src} public repositories",
        "",
        "Development runs collected for this project (issue 29). Every number was parsed by a script",
        "(`bench/collect/sources/<owner>__<name>.py`) from a file committed to a public GitHub repository, at",
        "the commit in `meta.csv` (`source_sha256`: the first 16 hex digits of the sha256 of each file read);",
        "nothing typed or digitised. Rebuild with `.venv/bin/python -m bench.collect.build` after fetching the",
        "repositories; `build_log.md` lists what was dropped (held out, copies, too short) and why.",
        "",
        "Layout as `../shared/data/grpo-more`: `runs.csv` is long (`run_id, step, reward`, then every channel",
        "the source logged, empty where not logged); `meta.csv` has one row per run (`source_repo, source_path,",
        "commit, model, params_b, group_size, learning_rate, batch_size, dataset, algorithm, notes, n_points,",
        "first_step, last_step`, plus `max_steps` where the source states the planned length, `regime` (shape",
        "tags of the whole run) and `source_sha256`). Weigh sources equally when pooling.",
        "",
        "| source repo | runs | points | regimes | what and caveats |",
        "|---|---|---|---|---|",
    ]
    for repo, g in meta.groupby("source_repo"):
        src = docs.get(repo, {})
        regimes = ", ".join(sorted(set(g["regime"].dropna().astype(str).str.split(",").explode().str.strip())))
        note = str(src.get("notes", "")).replace("\n", " ").replace("|", "/")
        lines.append(f"| {repo} | {len(g)} | {int(g['n_points'].sum())} | {regimes} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="source module names (owner__name)")
    ap.add_argument("--dry-run", action="store_true", help="check and report, write nothing")
    a = ap.parse_args(argv)
    data, meta, dropped, docs = collect(a.only)
    log = ["# build log of data/grpo-collected", "", "| run | repository | dropped because |", "|---|---|---|"]
    log += [f"| {d.run_id} | {d.repo} | {d.why} |" for d in dropped]
    print(
        f"{len(meta)} runs of {meta['source_repo'].nunique() if len(meta) else 0} sources kept; {len(dropped)} dropped"
    )
    for d in dropped:
        print(f"  dropped {d.repo} {d.run_id}: {d.why}")
    if a.dry_run:
        if len(meta):
            print(meta[["run_id", "source_repo", "n_points", "first_step", "last_step", "regime"]].to_string())
        return 0
    if a.only:
        raise SystemExit("--only writes nothing without --dry-run: the collected set is built from every source")
    OUT.mkdir(parents=True, exist_ok=True)
    data.to_csv(OUT / "runs.csv", index=False, float_format="%.6g")
    meta.to_csv(OUT / "meta.csv", index=False)
    (OUT / "README.md").write_text(_readme(data, meta, docs))
    (OUT / "build_log.md").write_text("\n".join(log) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
