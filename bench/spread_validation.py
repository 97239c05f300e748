"""Does the spread channel's physics (physics.md section 10) hold? Checked on the testbed, which knows every
prompt's pass rate, and on the real development runs that log the spread.

    .venv/bin/python bench/spread_validation.py   # ~5-10 min: bench/results/spread_validation.md (+ .json, figures)

Claims and how each is checked (:mod:`bench.spread_checks`):

(i) **E[frac_zero_std | u, nu] and E[reward_std | u, nu] with one nu per run.** Testbed runs (softmax bandit
    with unequal prompts, ``init_spread``; contextual MLP runs) record each prompt's exact pass rate at every
    step. The exact expectation of the logged channels follows from those rates without any Beta
    assumption; against it we put (a) the Beta-binomial with ONE nu fitted to the run's logged series and
    (b) with the Beta fitted to the step's rates (a nu per step). The error is in units of the sampling sd
    of one logged value (B groups): below 0.5 the model's error is small against the noise the channel
    carries anyway. The nu a run needs also shows whether nu is constant (its 10-90% range over the run).
(ii) **The growth-rate law.** The local growth of the reward (12 spans of the run) against the logged
    proxies ``1 - frac_zero_std`` (predicted for std-normalised GRPO) and ``reward_std^2`` (Dr.GRPO), and
    ``reward_std``: Spearman correlation and the share of the growth a proportional law explains, per run,
    on the testbed (exact expected reward) and on the real runs (logged reward), all spans and the rising
    spans only (before the reward's best span).
(iii) **Noise from G and N.** On 0/1 real runs, the logged reward_std against its Beta-binomial expectation
    (one nu, the smoothed reward as the pass rate) in units of its sampling sd with N from the metadata:
    about 1 if the noise model holds, above 1 if the metadata overstate the groups.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from devdata import batch_std_as_such, load_dev  # noqa: E402

from bayesgrpo.models.spread import spread_expectations  # noqa: E402
from bayesgrpo.testbed import TrainerConfig  # noqa: E402
from bayesgrpo.testbed.grpo import build, run  # noqa: E402
from bench.spread_checks import beta_nu, exact_channels, fit_nu, growth_law  # noqa: E402

RES = ROOT / "bench" / "results"
FIG = RES / "figures"
CMD = ".venv/bin/python bench/spread_validation.py"
SEGMENTS = 12
EXAMPLES = (0, 2, 5, 16, 18)  # runs drawn in the channel figure (std/Dr.GRPO, Adam/SGD, both heterogeneities)
BANDIT = dict(task="bandit", n_prompts=64, batch_size=16, vocab_size=8, max_steps=400, eval_every=50)
CASES = [
    dict(BANDIT, advantage=adv, optimizer=opt, learning_rate=lr, init_spread=spread, init_accuracy=acc, group_size=G)
    for adv, opt, lr in (("grpo", "adam", 0.05), ("drgrpo", "adam", 0.05), ("grpo", "sgd", 2.0), ("drgrpo", "sgd", 4.0))
    for spread in (0.5, 2.0)
    for acc, G in ((0.05, 8), (0.2, 4))
] + [
    dict(task="contextual", n_prompts=64, batch_size=16, hidden=64, optimizer="adam", learning_rate=0.01,
         init_accuracy=acc, group_size=8, advantage=adv, max_steps=300, eval_every=50)
    for adv in ("grpo", "drgrpo") for acc in (0.05, 0.2)
]  # fmt: skip


def testbed_run(kw: dict):
    """One testbed run with every prompt's exact pass rate at every step (of the sampling policy)."""
    cfg = TrainerConfig(**kw)
    task, pol, _, _ = build(cfg)  # the same task and policy structure as the run's own (deterministic build)
    rates = []

    def cb(n, *, params, sampling_params, grad):
        rates.append(task.expected_reward(pol.probs(sampling_params, task.train), task.train))

    df, _meta = run(cfg, callback=cb)
    return cfg, df, np.array(rates)


def check_testbed() -> tuple[list[dict], dict]:
    rows, examples = [], {}
    for i, kw in enumerate(CASES):
        cfg, df, p = testbed_run(kw)
        G, B = cfg.group_size, cfg.batch_size
        ex = exact_channels(p, G)
        m = ex["mean"]
        nu_t = beta_nu(p)
        live = (m > 0.02) & (m < 0.98)
        lg = np.log(np.clip(p, 1e-4, 1 - 1e-4) / (1 - np.clip(p, 1e-4, 1 - 1e-4)))
        sig_t = lg.std(-1)  # the logit spread of the prompts (a logit-normal family keeps it if logits shift alike)
        row = dict(case=i, task=cfg.task, advantage=cfg.advantage, optimizer=cfg.optimizer, init_spread=cfg.init_spread,
                   init_accuracy=cfg.init_accuracy, G=G, B=B, m0=float(m[0]), m_end=float(m[-1]),
                   nu_q10=float(np.nanquantile(nu_t[live], 0.1)), nu_q50=float(np.nanquantile(nu_t[live], 0.5)),
                   nu_q90=float(np.nanquantile(nu_t[live], 0.9)),
                   sigma_range=float(np.quantile(sig_t[live], 0.9) / np.quantile(sig_t[live], 0.1)))  # fmt: skip
        for ch in ("frac_reward_zero_std", "reward_std"):
            y = df[ch].to_numpy(float)
            nu1 = fit_nu(m, y, G, channel=ch, groups=B)
            one = spread_expectations(m, nu1, G)
            per = spread_expectations(m, np.where(np.isfinite(nu_t), nu_t, nu1), G)
            sd_key = "reward_std_sd" if ch == "reward_std" else None
            var = one[sd_key] ** 2 if sd_key else one[ch] * (1 - one[ch])
            sd = np.sqrt(np.maximum(var, 1e-12) / B)
            z = lambda e, x=ex[ch], sd=sd, live=live: float(np.sqrt(np.nanmean(((e - x) / sd)[live] ** 2)))  # noqa: E731
            tag = "fz" if ch == "frac_reward_zero_std" else "std"
            rel = float(np.sqrt(np.mean(((one[ch] - ex[ch]) / np.maximum(ex[ch], 0.02))[live] ** 2)))
            absr = float(np.sqrt(np.mean((one[ch] - ex[ch])[live] ** 2)))  # 0-1 rewards: in units of the range
            row.update({f"nu_{tag}": nu1, f"err_one_{tag}": z(one[ch]), f"err_step_{tag}": z(per[ch]),
                        f"noise_{tag}": z(y), f"relerr_one_{tag}": rel, f"abserr_one_{tag}": absr})  # fmt: skip
        expected = df["reward_expected"].to_numpy(float)
        st = df["step"].to_numpy(float)
        proxies = {"1-fz": 1 - df["frac_reward_zero_std"].to_numpy(float),
                   "std^2": df["reward_std"].to_numpy(float) ** 2, "std": df["reward_std"].to_numpy(float)}  # fmt: skip
        for name, x in proxies.items():
            for rising in (False, True):
                g = growth_law(st, expected, x, segments=SEGMENTS, rising_only=rising)
                row[f"rho_{name}{'_rise' if rising else ''}"] = g["rho"]
                row[f"r2_{name}{'_rise' if rising else ''}"] = g["r2"]
        rows.append(row)
        if i in EXAMPLES:
            examples[i] = dict(step=st, m=m, fz=df["frac_reward_zero_std"].to_numpy(float),
                               exact_fz=ex["frac_reward_zero_std"],
                               one_fz=spread_expectations(m, row["nu_fz"], G)["frac_reward_zero_std"],
                               std=df["reward_std"].to_numpy(float), exact_std=ex["reward_std"],
                               one_std=spread_expectations(m, row["nu_std"], G)["reward_std"], nu_t=nu_t,
                               title=(f"bandit {cfg.advantage}/{cfg.optimizer} spread {cfg.init_spread}" if cfg.task ==
                                      "bandit" else f"MLP {cfg.advantage}/{cfg.optimizer}") + f" G={G}")  # fmt: skip
        print(
            f"testbed {i}: nu {row['nu_fz']:.2f}/{row['nu_std']:.2f}, err one-nu fz {row['err_one_fz']:.2f}", flush=True
        )
    return rows, examples


def check_real() -> list[dict]:
    runs = batch_std_as_such(load_dev(more=True))  # the runs whose reward_std is a batch std are left out
    rows = []
    for rid in runs.run_ids:
        d = runs.run(rid)
        if "reward_std" not in d or d["reward_std"].notna().sum() < 20:
            continue
        meta = runs.meta.loc[rid]
        st, r = d["step"].to_numpy(float), d["reward"].to_numpy(float)
        s = d["reward_std"].to_numpy(float)
        row = dict(run_id=rid, source=str(meta["source_repo"]), n=len(d), binary=bool(r.min() >= 0 and r.max() <= 1))
        proxies = {"std^2": s**2, "std": s}
        if "frac_reward_zero_std" in d and d["frac_reward_zero_std"].notna().sum() >= 20:
            proxies["1-fz"] = 1 - d["frac_reward_zero_std"].to_numpy(float)
        for name, x in proxies.items():
            for rising in (False, True):
                g = growth_law(st, r, x, segments=SEGMENTS, rising_only=rising)
                row[f"rho_{name}{'_rise' if rising else ''}"] = g["rho"]
                row[f"r2_{name}{'_rise' if rising else ''}"] = g["r2"]
            # the relative rate: growth / (final level - level), the stiffness the law is about
            final = np.nanmean(r[st >= st[0] + 0.9 * (st[-1] - st[0])])
            gap = final - r
            big = np.abs(gap) > 0.1 * max(np.ptp(r), 1e-12)
            g = growth_law(st, np.where(big, r, np.nan), np.where(big, x * gap, np.nan), segments=SEGMENTS)
            row[f"rho_{name}_gap"] = g["rho"]
        G = meta.get("group_size")
        if row["binary"] and pd.notna(G) and G >= 2:
            G = int(G)
            B = meta.get("batch_size")
            N = max(1.0, float(B) / G) if pd.notna(B) else 1.0
            m = pd.Series(r).rolling(9, center=True, min_periods=3).mean().to_numpy()
            nu1 = fit_nu(m, s, G, channel="reward_std", groups=N)
            e = spread_expectations(m, nu1, G)
            live = np.isfinite(m) & (m > 0.02) & (m < 0.98) & np.isfinite(s)
            zres = (s - e["reward_std"]) / np.maximum(e["reward_std_sd"] / np.sqrt(N), 1e-6)
            row.update(G=G, N=N, nu_std=nu1, noise_ratio=float(np.sqrt(np.mean(zres[live] ** 2))),
                       ratio_s2=float(np.nanmedian((s**2 / np.maximum(m * (1 - m), 1e-6))[live])))  # fmt: skip
        rows.append(row)
    return rows


def _table(df: pd.DataFrame) -> str:
    """A markdown table of a frame (numbers rounded to 3 digits)."""
    cols = list(df.columns)
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    rows = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rows += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join(rows)


def _sw(df: pd.DataFrame, col: str) -> float:
    """Source-weighted mean (each source the same weight)."""
    g = df.groupby("source")[col].mean()
    return float(g.mean()) if len(g) else float("nan")


def figures(examples: dict, tb: pd.DataFrame, real: pd.DataFrame) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIG.mkdir(parents=True, exist_ok=True)
    names = []
    fig, axs = plt.subplots(2, len(examples), figsize=(3.6 * len(examples), 6), squeeze=False)
    for j, (i, e) in enumerate(examples.items()):
        for k, (ch, lab) in enumerate((("fz", "frac_reward_zero_std"), ("std", "reward_std"))):
            ax = axs[k, j]
            ax.plot(e["step"], e[ch], ".", ms=2, color="0.6", label="logged (B groups)")
            ax.plot(e["step"], e[f"exact_{ch}"], "k-", lw=1.2, label="exact from the prompts' rates")
            ax.plot(e["step"], e[f"one_{ch}"], "r--", lw=1.2, label="Beta-binomial, one nu per run")
            ax.set_ylabel(lab, fontsize=8)
            if k == 0:
                ax.set_title(f"#{i}: {e['title']}", fontsize=8)
        axs[1, j].set_xlabel("step", fontsize=8)
    axs[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(FIG / "spread_testbed_channels.png", dpi=110)
    names.append("spread_testbed_channels.png")
    fig, axs = plt.subplots(1, 3, figsize=(13, 3.8))
    for i, e in examples.items():
        live = (e["m"] > 0.02) & (e["m"] < 0.98)
        axs[0].semilogy(e["m"][live], e["nu_t"][live], ".", ms=2, label=f"#{i}")
    axs[0].set_xlabel("mean pass rate m")
    axs[0].set_ylabel("nu of the step's pass rates (moments)")
    axs[0].legend(fontsize=7)
    axs[0].set_title("is nu constant over a run? (testbed)", fontsize=9)
    for ax, col in ((axs[1], "rho_1-fz_rise"), (axs[2], "rho_std^2_rise")):
        for adv, mk in (("grpo", "o"), ("drgrpo", "s")):
            sub = tb[tb["advantage"] == adv]
            ax.plot(
                sub["init_spread"] + (0.05 if adv == "drgrpo" else 0), sub[col], mk, label=f"testbed {adv}", alpha=0.8
            )
        if col.replace("_rise", "") + "_rise" in real:
            ax.plot(np.full(len(real), 3.5) + 0.1 * np.random.default_rng(0).standard_normal(len(real)), real[col], "^",
                    ms=4, color="C2", alpha=0.6, label="real runs (x = 3.5)")  # fmt: skip
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xlabel("testbed init_spread (heterogeneity)")
        ax.set_ylabel(f"Spearman(growth, {col.split('_')[1]}), rising spans")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(FIG / "spread_growth_law.png", dpi=110)
    names.append("spread_growth_law.png")
    plt.close("all")
    return names


def report(tb: pd.DataFrame, real: pd.DataFrame, figs: list[str]) -> dict:
    res = {}
    b = tb[tb["task"] == "bandit"]
    res["one_nu"] = {k: float(tb[k].median()) for k in ("err_one_fz", "err_step_fz", "noise_fz", "err_one_std",
                                                        "err_step_std", "noise_std")}  # fmt: skip
    res["nu_range"] = float((tb["nu_q90"] / tb["nu_q10"]).median())
    res["sigma_range"] = float(tb["sigma_range"].median())
    res["relerr_one"] = {k: float(tb[f"relerr_one_{k}"].median()) for k in ("fz", "std")}
    res["abserr_one"] = {k: float(tb[f"abserr_one_{k}"].median()) for k in ("fz", "std")}
    res["nu_fz_vs_std"] = float(np.median(np.abs(np.log(tb["nu_fz"] / tb["nu_std"]))))
    law = {}
    for adv in ("grpo", "drgrpo"):
        sub = tb[tb["advantage"] == adv]
        law[adv] = {f"{s}{r}": (float(sub[f"rho_{s}{r}"].median()), float(sub[f"r2_{s}{r}"].median()))
                    for s in ("1-fz", "std^2", "std") for r in ("", "_rise")}  # fmt: skip
    res["law_testbed"] = law
    rl = {}
    long = real[real["n"] >= 200]
    res["law_real_long"] = {s: dict(runs=int(long[f"rho_{s}_rise"].notna().sum()),
                                    rho_median=float(long[f"rho_{s}_rise"].median()))
                            for s in ("std^2", "std") if f"rho_{s}_rise" in long}  # fmt: skip
    res["law_real_gap"] = {s: dict(runs=int(real[f"rho_{s}_gap"].notna().sum()),
                                   rho_median=float(real[f"rho_{s}_gap"].median()),
                                   share_pos=float((real[f"rho_{s}_gap"] > 0).mean()))
                           for s in ("std^2", "std", "1-fz")
                           if f"rho_{s}_gap" in real and real[f"rho_{s}_gap"].notna().any()}  # fmt: skip
    for s in ("1-fz", "std^2", "std"):
        for r in ("", "_rise"):
            col = f"rho_{s}{r}"
            if col in real and real[col].notna().any():
                x = real[real[col].notna()]
                rl[f"{s}{r}"] = dict(runs=len(x), sources=int(x["source"].nunique()), rho_median=float(x[col].median()),
                                     rho_sw=_sw(x, col), share_pos=float((x[col] > 0).mean()),
                                     r2_median=float(x[f"r2_{s}{r}"].median()))  # fmt: skip
    res["law_real"] = rl
    bn = real[real.get("noise_ratio", pd.Series(dtype=float)).notna()] if "noise_ratio" in real else real.iloc[:0]
    res["noise_real"] = dict(runs=len(bn), noise_ratio_median=float(bn["noise_ratio"].median()) if len(bn) else np.nan,
                             nu_median=float(bn["nu_std"].median()) if len(bn) else np.nan,
                             ratio_s2=float(bn["ratio_s2"].median()) if len(bn) else np.nan)  # fmt: skip
    v = lambda ok: "**holds**" if ok else "**does not hold**"  # noqa: E731
    o = res["one_nu"]
    import bayesgrpo.models.spread as SP

    derivation = SP.__doc__.split("Where the channel enters")[0].strip()
    md = ["# The spread channel's physics, checked", "",
          f"Regenerate: `{CMD}`. Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
          "## The derivation (from `bayesgrpo/models/spread.py`)", "", derivation, "", "## The checks", "",
          __doc__.split("checked (:mod:`bench.spread_checks`):")[1].strip(), "",
          "## (i) One nu per run", "",
          f"{len(tb)} testbed runs ({len(b)} bandit, {len(tb) - len(b)} contextual MLP; std GRPO and Dr.GRPO, Adam and "
          "heavy-ball SGD, two heterogeneities and two G). Median over runs of the RMS error against the exact "
          "expectation, in sampling sds of one logged value:", "",
          "| channel | Beta-binomial, one nu per run | Beta fitted per step | the logged value itself (noise) |",
          "|---|---|---|---|",
          f"| frac_reward_zero_std | {o['err_one_fz']:.2f} | {o['err_step_fz']:.2f} | {o['noise_fz']:.2f} |",
          f"| reward_std | {o['err_one_std']:.2f} | {o['err_step_std']:.2f} | {o['noise_std']:.2f} |", "",
          f"Verdict: E[frac_zero_std | u, nu] with one nu per run {v(o['err_one_fz'] < 0.5)}: its error is "
          f"{o['err_one_fz']:.2f} sampling sds of one logged value against {o['err_step_fz']:.2f} for a Beta fitted to "
          f"each step's rates (the Beta-binomial algebra is right; one nu per run is not). E[reward_std | u, nu] "
          f"with one nu per run {v(o['err_one_std'] < 0.5)} ({o['err_one_std']:.2f} against "
          f"{o['err_step_std']:.2f}). The nu of a "
          f"step's pass rates moves by a factor {res['nu_range']:.1f} over a run (10-90% range, median run), while the "
          f"prompts' logit spread moves by a factor {res['sigma_range']:.1f}: a logit-normal family with one spread "
          "per "
          f"run would be the better channel (not implemented: it needs quadrature and a root-find per step); a Beta "
          "whose nu follows a constant logit spread to first order (nu ~ 1 / (m (1 - m))) fits worse than a "
          "constant nu "
          f"(1.01 vs 0.81 sds). The nu fitted to the zero-std share and to reward_std agree within a factor "
          f"{np.exp(res['nu_fz_vs_std']):.2f} (median |log ratio|). In the channels' units the one-nu error is "
          f"{res['abserr_one']['fz']:.3f} (zero-std share) and {res['abserr_one']['std']:.3f} (reward_std, share "
          "of the "
          f"range): these are the channels' model-error sds (`MODEL_SD_ZERO`, `MODEL_SD_SPREAD` in "
          f"`bayesgrpo/models/spread.py`), added to the sampling noise, so a binned channel (noise / sqrt(b)) does not "
          f"over-trust the one-nu law.", "",
          "Per run:", "", _table(tb), "",
          "## (ii) The growth-rate law", "",
          "Testbed (growth of the exact expected reward), median over runs of (Spearman rho, share explained by the "
          "proportional law):", "", "| advantage | proxy | all spans | rising spans |",
          "|---|---|---|---|"]  # fmt: skip
    for adv, d in law.items():
        for s in ("1-fz", "std^2", "std"):
            a, r_ = d[s], d[s + "_rise"]
            md.append(f"| {adv} | {s} | {a[0]:+.2f}, {a[1]:+.2f} | {r_[0]:+.2f}, {r_[1]:+.2f} |")
    md += ["", "Real runs (growth of the logged reward):", "",
           "| proxy | spans | runs (sources) | median rho | source-weighted rho | share rho > 0 "
           "| median share explained |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for k, d in rl.items():
        s, r_ = (k[:-5], "rising") if k.endswith("_rise") else (k, "all")
        md.append(f"| {s} | {r_} | {d['runs']} ({d['sources']}) | {d['rho_median']:+.2f} | {d['rho_sw']:+.2f} | "
                  f"{d['share_pos']:.0%} | {d['r2_median']:+.2f} |")  # fmt: skip
    g1, g2 = law["grpo"]["1-fz_rise"], law["drgrpo"]["std^2_rise"]
    md += ["", f"Verdicts: on the testbed, growth proportional to (1 - frac_zero_std) with std GRPO "
           f"{v(g1[0] > 0.5 and g1[1] > 0.3)} in the rise (rho {g1[0]:+.2f}, explained {g1[1]:+.2f}); proportional to "
           f"reward_std^2 with Dr.GRPO {v(g2[0] > 0.5 and g2[1] > 0.3)} (rho {g2[0]:+.2f}, explained "
           f"{g2[1]:+.2f})."]  # fmt: skip
    if "std^2_rise" in rl:
        d = rl["std^2_rise"]
        md += [f"On the real runs the rising spans' growth and reward_std^2 correlate with median rho "
               f"{d['rho_median']:+.2f} ({d['share_pos']:.0%} of {d['runs']} runs positive) and a proportional law "
               f"explains {d['r2_median']:+.2f} of the growth: {v(d['rho_median'] > 0.3)} as a sign, "
               f"{v(d['r2_median'] > 0.3)} as a proportionality."]  # fmt: skip
    if "1-fz_rise" in rl:
        d = rl["1-fz_rise"]
        md += [f"With (1 - frac_zero_std) (the {d['runs']} runs that log it): median rho {d['rho_median']:+.2f}, "
               "explained "
               f"{d['r2_median']:+.2f}."]  # fmt: skip
    for s_, d in res["law_real_long"].items():
        md.append(
            f"Long runs only (>= 200 points): {s_} rising spans, median rho {d['rho_median']:+.2f} ({d['runs']} runs)."
        )
    for s_, d in res["law_real_gap"].items():
        md.append(
            f"As a relative rate (growth against {s_} x (final level - level), spans at least 10% of the range "
            f"from the end): median rho {d['rho_median']:+.2f}, positive in {d['share_pos']:.0%} of {d['runs']} runs."
        )
    n = res["noise_real"]
    md += ["", "## (iii) The noise model on real 0/1 runs", "",
           f"{n['runs']} 0/1 runs with reward_std, G and batch size from the metadata: the logged reward_std's RMS "
           f"deviation from its one-nu Beta-binomial expectation is {n['noise_ratio_median']:.2f} sampling sds "
           f"(median; 1 = the noise model from G and N is right). Their nu: median {n['nu_median']:.2f}; "
           "reward_std^2 / (u (1 - u)) "
           f"median {n['ratio_s2']:.2f} (physics.md section 10 quotes 0.25-0.56 for G = 4).", "",
           "Real runs:", "", _table(real), "",
           "## Figures", "", *[f"![{f}](figures/{f})" for f in figs], ""]  # fmt: skip
    (RES / "spread_validation.md").write_text("\n".join(md) + "\n")
    (RES / "spread_validation.json").write_text(json.dumps(res, indent=1, default=float))
    return res


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb_rows, ex = check_testbed()
        real = pd.DataFrame(check_real())
    tb = pd.DataFrame(tb_rows)
    figs = figures(ex, tb, real)
    res = report(tb, real, figs)
    print(json.dumps(res, indent=1, default=float)[:3000])


if __name__ == "__main__":
    main()
