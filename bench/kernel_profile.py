"""Where a log-density + gradient evaluation goes: the Kalman kernel against the rest of the compiled graph,
µs per call against flops per call; writes bench/results/kernel.md and kernel.json.

    .venv/bin/python bench/kernel_profile.py          # ~5 min (compiles the degeneracy/logistic models once)

* **Whole evaluation**: nutpie's C callback of the compiled model (the disk cache's machine code, what
  the sampler calls), at the model's initial point with a simulated run's data swapped in, called
  from a numba loop (no Python in between). The oscillator model at refresh interval K = 1 and K = 8,
  the degeneracy and the logistic models (EKF), at T = 50, 200 and 300 grid steps, every step observed.
* **Kernel alone**: the likelihood kernel (log-likelihood and its gradient), called from a numba loop
  with the same inputs, both ways: forward-mode sensitivities (the former kernels,
  ``bench/proto/forward_mode.py``) and reverse-mode, adjoint (the shipped kernels:
  ``bayesgrpo/models/kalman_adjoint.py`` for the linear filter, ``bayesgrpo/models/degeneracy.py`` for the
  extended one). "rest of the graph" = whole - the
  shipped kernel; "whole, other kernel" = rest + the kernel the graph does not ship.
* **flops per call**: counted from each kernel's source (one flop per + - * /; log, exp, pow counted
  apart), per grid step with an observation, times T (:data:`FLOPS`).

Timing: CPU time (``time.process_time``), best of 7 repeats of N calls, one thread; the machine is
shared (load recorded), so the best repeat is the least disturbed one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "proto"))
OUT = ROOT / "bench" / "results"
CMD = ".venv/bin/python bench/kernel_profile.py"
TS = (50, 200, 300)
SIM = dict(r0=0.2, r_star=0.75, a=0.01, momentum=0.9, sigma_p=0.005, sigma_m=0.05)

#: flops per observed grid step, counted from each kernel's source: (arithmetic, log/exp/pow calls)
#: forward-mode (one sensitivity per parameter and state moment): 2-state ``kalman_op._ar2_run`` predict 98
#: (13 for the moments, 6 x 12 for the sensitivities, 13 for the a/mu/q terms), update 25 + 6 x 53, log S;
#: 3-state ``_refresh_run`` predict 192, update 31 + 6 x 59, log S; EKF ``degeneracy._ekf_run`` (8
#: parameters) h and its partials 48 + pow + exp, predict 316, update 25 + 8 x 53, log S.
#: adjoint (``bayesgrpo/models/kalman_adjoint.py``, ``degeneracy.py``): forward 36 / 55 / 89 (the EKF's h with one log and one exp),
#: backward 81 / 136 / 96; log S once per block of steps (amortised ~0).
FLOPS = {
    ("forward-mode", 1): (441, 1), ("forward-mode", 8): (577, 1), ("forward-mode", "ekf"): (813, 3),
    ("adjoint", 1): (117, 0), ("adjoint", 8): (191, 0), ("adjoint", "ekf"): (185, 2),
}  # fmt: skip


#: the kernel each family's graph calls
SHIPPED = {"linear": "adjoint", "ekf": "adjoint"}


def sim_arrays(T: int, kind: str, K: int = 1):
    import pandas as pd

    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import default_prior
    from bayesgrpo.schema import RunSet
    from bench.physics_reference import simulate

    sim = simulate(T, refresh_interval=K, seed=100, **SIM)
    rid = f"sim-{T}"
    rs = RunSet.from_frames(
        pd.DataFrame({"run_id": rid, "step": np.arange(1, T + 1), "reward": np.asarray(sim.observed)}),
        pd.DataFrame({"run_id": [rid], "beta1": [0.9], "refresh_interval": [K], "max_steps": [2 * T]}),
    )
    prior = default_prior(kind)
    arr, _ = prepare_arrays(rs, horizon=2 * T, prior=prior)
    return arr, prior


def compiled_model(arr, prior, kind_name: str):
    import dataclasses
    import functools

    from bayesgrpo.inference import sampling
    from bayesgrpo.models.kinds import get_kind

    kind = get_kind(kind_name)
    template = dataclasses.replace(arr, mu_mean=np.full(1, prior.mu_default))
    c = sampling.compile_model(kind.graph_key(arr, prior, False),
                               functools.partial(kind.build, template, prior=prior, hierarchical=False))  # fmt: skip
    known = {s.name for s in c.shared_var_keys}
    return c.with_data(**{k: v for k, v in arr.data(prior).items() if k in known}), c.initial_point_func.centre


def best_us(loop, args, n: int, repeats: int = 7) -> float:
    loop(2, *args)  # compile
    ts = []
    for _ in range(repeats):
        t0 = time.process_time()
        loop(n, *args)
        ts.append((time.process_time() - t0) / n)
    return min(ts) * 1e6


def make_loops():
    import ctypes

    import numba

    proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p)  # fmt: skip

    def callback_loop(address):
        fn = proto(address)

        @numba.njit
        def loop(n, x, g, lp, udp):
            s = 0
            for _ in range(n):
                s += fn(x.size, x.ctypes.data, g.ctypes.data, lp.ctypes.data, udp)
            return s

        return loop

    def kernel_loop(kernel):
        @numba.njit
        def loop(n, *args):
            s = 0.0
            for _ in range(n):
                ll, g = kernel(*args)
                s += ll[0] + g[0, 0]
            return s

        return loop

    return callback_loop, kernel_loop


def kernel_inputs(cm, x, kind: str):
    """The kernel's inputs at the point x: (y, mask, [K | kappa], r0, r_star, a, mu, q, r[, L, lam]), from the
    compiled model's expand function (its deterministics at x)."""
    import ctypes

    names, slices, _shapes = cm.shape_info
    out = np.zeros(cm.n_expanded)
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)(cm.compiled_expand_func.address)  # fmt: skip
    rc = fn(cm.n_dim, cm.n_expanded, x.ctypes.data, out.ctypes.data, cm.user_data.ctypes.data)
    if rc != 0:
        raise RuntimeError(f"expand callback failed ({rc})")
    val = {n: out[s].copy() for n, s in zip(names, slices, strict=True)}
    data = {v.name: cm.shared_data[k] for v, k in cm.shared_var_keys.items()}
    y, mask = np.ascontiguousarray(data["y"]), np.ascontiguousarray(data["mask"])
    lin = [val["r0"], val["r_star"], val["a"], val["mu"], val["sigma_p"] ** 2, val["sigma_m"] ** 2]
    if kind in ("degeneracy", "logistic"):
        lam = val["lam"] if "lam" in val else np.zeros(1)
        return [y, mask, np.full(1, 1.25), *lin, val["L"], lam]
    return [y, mask, np.asarray(data["refresh"], dtype=np.int64), *lin]


def measure() -> list[dict]:
    import forward_mode as F

    from bayesgrpo.models.degeneracy import ekf_loglik_grad
    from bayesgrpo.models.kalman_op import refresh_loglik_grad

    callback_loop, kernel_loop = make_loops()
    linear = {"forward-mode": kernel_loop(F.refresh_loglik_grad), "adjoint": kernel_loop(refresh_loglik_grad)}
    ekf = {"forward-mode": kernel_loop(F.ekf_forward_loglik_grad), "adjoint": kernel_loop(ekf_loglik_grad)}
    kernels = {"linear": linear, "ekf": ekf}
    rows = []
    for kind, K in (("oscillator", 1), ("oscillator", 8), ("degeneracy", 1), ("logistic", 1)):
        fam = "ekf" if kind in ("degeneracy", "logistic") else "linear"
        for T in TS:
            arr, prior = sim_arrays(T, kind, K)
            cm, x0 = compiled_model(arr, prior, kind)
            x = np.ascontiguousarray(x0, dtype=np.float64)
            g, lp = np.zeros(cm.n_dim), np.zeros(1)
            n = max(2000, int(4e5 / T))
            whole = best_us(callback_loop(cm.compiled_logp_func.address), (x, g, lp, cm.user_data.ctypes.data), n)
            args = kernel_inputs(cm, x, kind)
            row = {"kind": kind, "K": K, "T": T, "whole_us": whole, "n_dim": int(cm.n_dim)}
            for method, loop in kernels[fam].items():
                row[f"kernel_{method}_us"] = best_us(loop, args, n)
                fl, tr = FLOPS[(method, K if fam == "linear" else "ekf")]
                row[f"flops_{method}"] = fl * T
                row[f"transcendental_{method}"] = tr * T
            shipped, other = SHIPPED[fam], ("forward-mode" if SHIPPED[fam] == "adjoint" else "adjoint")
            row["shipped"] = shipped
            row["rest_us"] = whole - row[f"kernel_{shipped}_us"]
            row["whole_other_us"] = row["rest_us"] + row[f"kernel_{other}_us"]
            rows.append(row)
            print(row, flush=True)
    return rows


def report(res: dict) -> str:
    md = ["# The log-density + gradient: kernel vs the rest of the graph, µs vs flops", "",
          f"Regenerate: `{CMD}` (the script's docstring says what each column measures). Whole evaluation: "
          "nutpie's C callback of the compiled model (the disk cache's machine code) at the model's initial point, "
          "data of a simulated run with every step observed; kernel alone: the likelihood kernel with the same "
          "inputs; both called from numba loops, CPU time, best of 7 repeats (one thread). The graphs call the "
          "adjoint kernels (the linear filter of the oscillator, the extended filter of the degeneracy and "
          "logistic kinds; the spread-channel graph keeps the forward-mode one). Rest of the graph = whole - the shipped kernel (priors, transforms, "
          "non-centred parameters, data extraction, allocations); whole, other kernel = rest + the kernel not "
          "shipped. flops counted from each kernel's source (:data:`FLOPS`).", "",
          f"Load average {res['load'][0]:.2f} at the start, {res['load'][1]:.2f} at the end. "
          f"Tree `{res['commit']}`.", "",
          "| model | K | T | shipped kernel | whole evaluation (µs) | kernel: forward-mode (µs) | kernel: adjoint (µs) | "
          "rest of the graph (µs) | whole, other kernel (µs) | flops per call: forward-mode / adjoint | "
          "flops per ns (adjoint kernel) |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in res["rows"]:
        md.append(
            f"| {r['kind']} | {r['K']} | {r['T']} | {r['shipped']} | **{r['whole_us']:.2f}** | "
            f"{r['kernel_forward-mode_us']:.2f} | {r['kernel_adjoint_us']:.2f} | {r['rest_us']:.2f} | "
            f"{r['whole_other_us']:.2f} | "
            f"{r['flops_forward-mode']:,} / {r['flops_adjoint']:,} | "
            f"{r['flops_adjoint'] / (1e3 * r['kernel_adjoint_us']):.1f} |"
        )  # fmt: skip
    return "\n".join(md) + "\n"


def main() -> None:
    import subprocess

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    res = {"load": [os.getloadavg()[0]], "commit": commit.stdout.strip()}
    res["rows"] = measure()
    res["load"].append(os.getloadavg()[0])
    (OUT / "kernel.json").write_text(json.dumps(res, indent=1))
    (OUT / "kernel.md").write_text(report(res))
    print(report(res))


if __name__ == "__main__":
    main()
