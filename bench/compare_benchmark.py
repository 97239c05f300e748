"""Benchmark of ``bayesgrpo compare`` on the testbed G x size sweep and on the grpo-public runs.

Regenerate (the two fits are independent; run them in parallel on 2 cores, then assemble):

    .venv/bin/python bench/compare_benchmark.py testbed &
    .venv/bin/python bench/compare_benchmark.py public &
    wait
    .venv/bin/python bench/compare_benchmark.py testbed_saturation   # contrasts from the saturation kind alone
    .venv/bin/python bench/compare_benchmark.py report     # writes bench/results/compare.md + compare.json

Datasets (documented subsets, chosen for cost: the Kalman likelihood costs O(runs x steps) per gradient):

* ``testbed``: ``g_bandit_grpo`` (bandit, std GRPO, KL in the reward, G in {2,4,8,16}) and ``g_ctx``
  (contextual MLP h16/h64/h256, Adam, G in {2,4,8,16}), seed 0 (16 runs), steps <= 400, the
  logged batch-mean ``reward``; by family, group_size; one shared reward scale (all rewards in [0, 1]).
* ``public``: the Sunshine535/nips-grpo-dynamics runs (one source, one 0-1 reward definition), grouped
  by model and G: Qwen2.5-7B G=4, Qwen3.5-9B G=2 and G=4 — the first 12 runs (sorted run id) of each
  cell (36 runs); by model, group_size; scale shared within the source.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "results"
FIG = OUT / "figures"
PUBLIC = Path("/work/shared/data/grpo-public")

DRAWS, TUNE, CHAINS = 300, 500, 2


def load(name: str):
    from bayesgrpo.schema import RunSet

    if name.startswith("testbed"):
        r = pd.read_csv(ROOT / "data/testbed/runs.csv.gz")
        m = pd.read_csv(ROOT / "data/testbed/meta.csv.gz")
        m = m[m["sweep"].isin(["g_bandit_grpo", "g_ctx"]) & m["seed"].isin([0])]
        r = r[r["run_id"].isin(m["run_id"])][["run_id", "step", "reward"]]
        return RunSet.from_frames(r, m), dict(by=("family", "group_size"), max_steps=400)
    r = pd.read_csv(PUBLIC / "runs.csv")
    m = pd.read_csv(PUBLIC / "meta.csv")
    m = m[m["source_repo"] == "Sunshine535/nips-grpo-dynamics"]
    cells = [
        ("Qwen/Qwen2.5-7B-Instruct (LoRA r=64)", 4),
        ("Qwen/Qwen3.5-9B (LoRA r=64)", 2),
        ("Qwen/Qwen3.5-9B (LoRA r=64)", 4),
    ]
    keep = []
    for model, g in cells:
        ids = sorted(m.loc[(m["model"] == model) & (m["group_size"] == g), "run_id"])[:12]
        keep += ids
    m = m[m["run_id"].isin(keep)].copy()
    m["model"] = m["model"].str.replace(r" \(LoRA r=64\)", "", regex=True).str.replace("Qwen/", "", regex=False)
    r = r[r["run_id"].isin(keep)][["run_id", "step", "reward"]].dropna()
    return RunSet.from_frames(r, m), dict(by=("model", "group_size"), max_steps=None)


def fit(name: str) -> None:
    from bayesgrpo.compare.model import compare_runs
    from bayesgrpo.inference.sampling import SamplerConfig
    from bayesgrpo.plots.forest import forest_plot

    runs, kw = load(name)
    if name.endswith("_saturation"):  # robustness check: the best-LOO, well-mixing kind alone
        kw["kinds"] = ("saturation",)
    t0 = time.perf_counter()
    res = compare_runs(runs, sampler=SamplerConfig(draws=DRAWS, tune=TUNE, chains=CHAINS), seed=0, **kw)
    dt = time.perf_counter() - t0
    pre = OUT / f"compare_{name}"
    res.contrasts.to_csv(f"{pre}_contrasts.csv", index=False)
    res.loo.to_csv(f"{pre}_loo.csv", index=False)
    res.pareto_k.to_csv(f"{pre}_pareto_k.csv", index=False)
    res.tau_by_size.to_csv(f"{pre}_tau_by_size.csv", index=False)
    res.health.to_csv(f"{pre}_health.csv", index=False)
    Path(f"{pre}_summary.md").write_text(res.summary_markdown())
    FIG.mkdir(parents=True, exist_ok=True)
    forest_plot(res).savefig(FIG / f"compare_{name}_forest.png", dpi=120)
    info = {
        "dataset": name, "n_runs": len(runs), "by": list(kw["by"]), "max_steps": kw["max_steps"],
        "draws": DRAWS, "tune": TUNE, "chains": CHAINS, "seconds": round(dt, 1), "primary": res.primary,
        "scale_groups": sorted(set(res.arrays.scale_groups)), "g_ref": res.arrays.g_ref,
        "b": res.g_exponent(),
    }  # fmt: skip
    Path(f"{pre}_info.json").write_text(json.dumps(info, indent=2, default=str))
    print(res.summary_markdown())


def report() -> None:
    parts = ["# `bayesgrpo compare` benchmark", "",
             "Regenerate: `.venv/bin/python bench/compare_benchmark.py testbed & .venv/bin/python bench/compare_benchmark.py public & wait; .venv/bin/python bench/compare_benchmark.py testbed_saturation; "
             ".venv/bin/python bench/compare_benchmark.py report`. Model and conventions: `bayesgrpo/compare.py` docstring; "
             "theory: physics.md sections 5, 6, 8 (predictions 2, 3, 4, 8, 9).", ""]  # fmt: skip
    js = {}
    for name in ("testbed", "testbed_saturation", "public"):
        pre = OUT / f"compare_{name}"
        if not Path(f"{pre}_info.json").exists():
            parts += [f"## {name}: not run", ""]
            continue
        info = json.loads(Path(f"{pre}_info.json").read_text())
        js[name] = {
            "info": info,
            "contrasts": pd.read_csv(f"{pre}_contrasts.csv").to_dict(orient="records"),
            "loo": pd.read_csv(f"{pre}_loo.csv").to_dict(orient="records"),
            "tau_by_size": pd.read_csv(f"{pre}_tau_by_size.csv").to_dict(orient="records"),
            "health": pd.read_csv(f"{pre}_health.csv").to_dict(orient="records"),
        }
        parts += [f"## Dataset `{name}` — {info['n_runs']} runs, by {', '.join(info['by'])}, "
                  f"{info['chains']} chains x {info['draws']} draws (tune {info['tune']}), {info['seconds']:.0f} s", "",
                  f"![forest](figures/compare_{name}_forest.png)", ""]  # fmt: skip
        body = Path(f"{pre}_summary.md").read_text().split("\n", 1)[1]
        parts += [body.replace("\n## ", "\n### "), ""]
    (OUT / "compare.json").write_text(json.dumps(js, indent=2, default=str))
    head = (OUT / "compare_notes.md").read_text() if (OUT / "compare_notes.md").exists() else ""
    (OUT / "compare.md").write_text("\n".join(parts[:4]) + "\n" + head + "\n" + "\n".join(parts[4:]))
    print((OUT / "compare.md").read_text())


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "report"
    if what == "report":
        report()
    else:
        fit(what)
