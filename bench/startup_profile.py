"""Where a new process's time goes: imports of ``bayesgrpo --help``, ``summary`` and a warm ``forecast``;
nutpie's Python layer against its Rust core; writes bench/results/startup.md and startup.json.

    .venv/bin/python bench/startup_profile.py            # ~3 min on a quiet machine

1. **Commands.** Each command runs in fresh processes (``python -c "from bayesgrpo.cli import app; app()"
   ...`` with this tree first on ``PYTHONPATH``): wall clock and CPU time (user + system of the child,
   all threads) of ``REPEATS`` runs, and one run under ``python -X importtime`` whose tree gives, per
   top-level package, the import time it cost and the chain of imports that first pulled it in.
   ``forecast`` is one grpo-public run at 30% of its steps with the disk cache warm (a first call
   fills it).
2. **nutpie's imports.** What importing the sampler costs in a process that already holds numpy,
   pandas and numba (as a warm forecast does): ``import nutpie`` as is; with ``arviz`` and
   ``xarray`` deferred by ``importlib.util.LazyLoader``; and loading only nutpie's Rust extension
   (:func:`bayesgrpo.inference.nuts_core.nutpie_lib`).

Wall clock on this shared 2-core machine depends on the load (recorded); CPU time much less so, and
the import tree's shares hardly at all.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
PY = sys.executable
PUBLIC = ROOT.parent / "shared" / "data" / "grpo-public"
RID = "teaching_an_llm_to_reason__grpo_training__a12f55c"
REPEATS = int(os.environ.get("STARTUP_REPEATS", "5"))
CMD = ".venv/bin/python bench/startup_profile.py"
ENTRY = "import sys; from bayesgrpo.cli import app; sys.argv[0] = 'bayesgrpo'; app()"
COMMANDS = {
    "--help": ["--help"],
    "summary": ["summary", str(PUBLIC / "runs.csv"), "--meta", str(PUBLIC / "meta.csv")],
    "forecast (warm)": ["forecast", str(PUBLIC / "runs.csv"), "--meta", str(PUBLIC / "meta.csv"), "--until-fraction",
                        "0.3", "--run", RID, "--out", str(Path(tempfile.gettempdir()) / "bayesgrpo-startup.csv")],
}  # fmt: skip
#: packages a forecast never needs (what issue 20 asks to keep out)
HEAVY = ("scipy", "matplotlib", "arviz", "arviz_base", "arviz_stats", "arviz_plots", "xarray", "dask", "pymc",
         "pytensor", "distributed")  # fmt: skip


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}


def timed(argv: list[str]) -> dict:
    """Wall clock and CPU seconds (user + system, every thread) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "stderr": proc.stderr}


# ------------------------------------------------------------------------------------- import tree
def parse_importtime(text: str) -> list:
    """The import tree of ``-X importtime`` output: nodes ``(name, self_us, cum_us, children)``."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, rest = line.split(":", 1)
        s, c, name = rest.split("|")
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows.append((depth, name.strip(), int(s), int(c)))
    stack: list = []  # post-order: a node's children are the deeper nodes just before it
    for depth, name, s, c in rows:
        kids = []
        while stack and stack[-1][0] > depth:
            kids.append(stack.pop()[1])
        stack.append((depth, (name, s, c, kids[::-1])))
    return [n for _, n in stack]


def package_costs(roots: list) -> tuple[dict, dict]:
    """Per top-level package: import time (ms, the sum of its modules' own times) and the chain of imports
    into its costliest subtree (``(at run time)``: imported inside a function after start-up)."""
    cost: dict = {}
    via: dict = {}  # package -> (cumulative us of its largest subtree, chain)

    def walk(node, path):
        name, s, c, kids = node
        top = name.split(".")[0]
        cost[top] = cost.get(top, 0.0) + s / 1000
        if not path or path[-1].split(".")[0] != top:  # the root of a subtree of this package
            chain = path[-3:] + [name] if path else ["(at run time)", name]
            if c > via.get(top, (-1, None))[0]:
                via[top] = (c, chain)
        for k in kids:
            walk(k, path + [name])

    for r in roots:
        walk(r, [])
    return cost, {k: v[1] for k, v in via.items()}


def command_profile(label: str, args: list[str]) -> dict:
    argv = [PY, "-c", ENTRY, *args]
    runs = [timed(argv) for _ in range(REPEATS)]
    prof = subprocess.run([PY, "-X", "importtime", *argv[1:]], env=_env(), capture_output=True, text=True)
    cost, first = package_costs(parse_importtime(prof.stderr))
    total = sum(cost.values())
    top = sorted(cost.items(), key=lambda kv: -kv[1])[:14]
    return {
        "label": label,
        "wall_s": [r["wall"] for r in runs],
        "cpu_s": [r["cpu"] for r in runs],
        "wall_median_s": statistics.median(r["wall"] for r in runs),
        "cpu_median_s": statistics.median(r["cpu"] for r in runs),
        "import_ms": total,
        "packages": [{"package": p, "ms": ms, "share": ms / total, "via": " > ".join(first[p])} for p, ms in top],
        "heavy_loaded": {p: cost[p] for p in HEAVY if p in cost},
    }


# ------------------------------------------------------------------------------------ nutpie options
NUTPIE_CHILD = r"""
import importlib.util, json, sys, time
mode = sys.argv[1]
def lazy(name):
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    loader.exec_module(mod)
import numpy, pandas, numba.core.registry  # a warm forecast holds these already
c0, t0 = time.process_time(), time.perf_counter()
if mode == "import nutpie":
    import nutpie
elif mode == "LazyLoader(arviz, xarray), import nutpie":
    lazy("arviz"); lazy("xarray")
    import nutpie
else:
    from bayesgrpo.inference.nuts_core import nutpie_lib
    nutpie_lib()
c1, t1 = time.process_time(), time.perf_counter()
loaded = [m for m in HEAVY if m in sys.modules and type(sys.modules[m]).__name__ != "_LazyModule"
          and (m != "scipy" or "scipy.stats" in sys.modules)]  # numba imports scipy's top level (a few ms)
print(json.dumps({"cpu": c1 - c0, "wall": t1 - t0, "loaded": loaded}))
""".replace("HEAVY", repr(HEAVY))
NUTPIE_MODES = ("import nutpie", "LazyLoader(arviz, xarray), import nutpie", "nuts_core.nutpie_lib() (Rust core only)")


def nutpie_options() -> list[dict]:
    out = []
    for mode in NUTPIE_MODES:
        reps = []
        for _ in range(REPEATS):
            p = subprocess.run([PY, "-c", NUTPIE_CHILD, mode], env=_env(), capture_output=True, text=True, check=True)
            reps.append(json.loads(p.stdout.splitlines()[-1]))
        cpu, wall = statistics.median(r["cpu"] for r in reps), statistics.median(r["wall"] for r in reps)
        out.append({"mode": mode, "cpu_median_s": cpu, "wall_median_s": wall, "loaded": reps[0]["loaded"]})
    return out


# ------------------------------------------------------------------------------------------- report
def report(res: dict) -> str:
    md = ["# Start-up: what a new process imports, and what it costs", "",
          f"Regenerate: `{CMD}`. This 2-core machine, shared with other work: load average {res['load'][0]:.2f} at the "
          f"start, {res['load'][1]:.2f} at the end (wall clock grows with the load; CPU time and the import shares "
          f"much less). Tree: `{res['commit']}`. {REPEATS} runs per command; medians.", "",
          "## Commands", "", "| command | wall (s) | CPU (s) | imports (ms, `-X importtime`) | heavy packages loaded |",
          "|---|---|---|---|---|"]  # fmt: skip
    for c in res["commands"]:
        heavy = ", ".join(f"{p} ({ms:.0f} ms)" for p, ms in c["heavy_loaded"].items()) or "none"
        md.append(f"| `bayesgrpo {c['label']}` | {c['wall_median_s']:.2f} | {c['cpu_median_s']:.2f} | "
                  f"{c['import_ms']:.0f} | {heavy} |")  # fmt: skip
    for c in res["commands"]:
        md += ["", f"### `bayesgrpo {c['label']}`: import time per top-level package", "",
               "| package | ms | share | costliest import chain |", "|---|---|---|---|"]  # fmt: skip
        for p in c["packages"]:
            md.append(f"| {p['package']} | {p['ms']:.0f} | {p['share']:.0%} | `{p['via']}` |")
    md += ["", "## nutpie: its Python layer against its Rust core", "",
           "Importing the sampler in a process that already holds numpy, pandas and numba (a warm forecast does).", "",
           "| how | CPU (s) | wall (s) | heavy packages loaded |", "|---|---|---|---|"]  # fmt: skip
    for o in res["nutpie"]:
        md.append(
            f"| {o['mode']} | {o['cpu_median_s']:.3f} | {o['wall_median_s']:.3f} | {', '.join(o['loaded']) or 'none'} |"
        )
    md += ["", "Deferring arviz and xarray with `LazyLoader` saves almost nothing: `nutpie/sample.py`'s own "
           "`import arviz` materialises the lazy module (Python's import statement reads the module's `__spec__`, "
           "which a lazy module answers by loading itself), and arviz imports xarray, scipy and matplotlib in turn. "
           "Loading only the Rust extension `nutpie._lib` and reproducing the few calls of nutpie's Python layer "
           "(`bayesgrpo/inference/nuts_core.py`, bit-identical draws) removes the whole cost.", ""]  # fmt: skip
    return "\n".join(md) + "\n"


def main() -> None:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    res = {"load": [os.getloadavg()[0]], "commit": commit.stdout.strip() + (" (uncommitted changes)" if dirty else "")}
    timed([PY, "-c", ENTRY, *COMMANDS["forecast (warm)"]])  # fill the disk cache: the runs below are warm
    res["commands"] = [command_profile(label, args) for label, args in COMMANDS.items()]
    res["nutpie"] = nutpie_options()
    res["load"].append(os.getloadavg()[0])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "startup.json").write_text(json.dumps(res, indent=1))
    (OUT / "startup.md").write_text(report(res))
    print(report(res))


if __name__ == "__main__":
    main()
