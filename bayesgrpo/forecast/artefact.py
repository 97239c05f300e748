"""The saved forecast: one self-describing netCDF file (an ``xarray.DataTree``, ArviZ's layout).

Groups (format :data:`ARTEFACT_SCHEMA`):

* ``posterior`` -- the per-run posterior draws (``chain, draw, run``; :data:`~bayesgrpo.forecast.config.STORED_VARS`)
  and, for a pooled fit, ``hyperparameters``;
* ``sample_stats`` -- the sampler's per-draw statistics (:data:`~bayesgrpo.forecast.config.STAT_VARS`:
  divergences, energy, tree depth ...; ``run`` is a dimension when each run was sampled alone);
* ``observed_data`` -- the runs as fitted (their logged prefix: ``reward`` and every channel on
  ``run x step``, metadata as coordinates; :meth:`bayesgrpo.schema.RunSet.to_xarray`);
* ``posterior_predictive`` -- the final reward and the stop step per draw (``chain, draw, run``), to
  the horizon of the fit; paths are recomputed exactly on demand (seeded by run id);
* ``constant_data`` -- the model arrays (``pm.Data`` of the graph), ``run_info`` (the run plan and the
  normalisation), ``sampler_health``.

Attributes: the schema, the configuration, the sampler, the prior's and the calibration's identities,
the **model identity** (:func:`~bayesgrpo.forecast.config.model_identity`), the run order and the
version. :func:`read` checks the identity against the stored configuration (a file edited or written
under another meaning of the identity is refused) and, when the caller names the model it expects,
against that one (a different model is refused) -- the check of pymc-marketing's model builder.

``az.summary(xr.open_datatree(path), group="posterior")``, ``az.rhat``, ``az.ess`` and ``az.bfmi``
work on the file as it is.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bayesgrpo._version import __version__
from bayesgrpo.errors import ArtefactError
from bayesgrpo.forecast.config import ForecastConfig
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import ModelArrays, RunInfo
from bayesgrpo.schema import RunSet

__all__ = ["ARTEFACT_SCHEMA", "READABLE_SCHEMAS", "to_datatree", "read", "write"]

#: version of the saved-forecast format; checked on load
ARTEFACT_SCHEMA = "bayesgrpo.forecast/3"
#: formats this version reads: 1 (no attribute; bayesgrpo 0.1), 2 (no sample_stats, observed_data,
#: predictive group or identity; ``fit_data``), 3
READABLE_SCHEMAS = ("bayesgrpo.forecast/1", "bayesgrpo.forecast/2", ARTEFACT_SCHEMA)
_CONSTANT = ("refresh", "span", "noise", "mu_mean", "mu_known", "family_idx", "log_size", "r0_obs", "size_known",
             "floor", "floor_known", "fraction", "group_size", "width", "width_known")  # fmt: skip


def _constant_data(arr):
    import xarray as xr

    return xr.Dataset(
        {"y": (("step_grid", "run"), arr.y), "mask": (("step_grid", "run"), arr.mask),
         "channels": (("channel_row", "step_grid", "run"), arr.channels),
         **{n: ("run", getattr(arr, n)) for n in _CONSTANT}},
        coords={"run": list(arr.run_ids)},
    )  # fmt: skip


def _health(fit):
    import xarray as xr

    hd = pd.DataFrame(fit.health).T
    hd["seconds"] = pd.Series(fit.seconds)
    hd.index.name = "run"
    return xr.Dataset.from_dataframe(hd.astype(float))


def _predictive(fit):
    """Final reward and stop step per draw, ``(chain, draw, run)``, to the fit's horizon."""
    import xarray as xr

    post = fit.posterior
    C, D = post.sizes["chain"], post.sizes["draw"]
    fin, stop, reached = [], [], []
    for rid in fit.forecast_ids:
        fin.append(np.asarray(fit.final_draws(rid), dtype=float).reshape(C, D))
        s, r = fit.stop_draws(rid)
        stop.append(np.asarray(s).reshape(C, D))
        reached.append(np.asarray(r).reshape(C, D))
    dims = ("chain", "draw", "run")
    coords = {"chain": post["chain"].to_numpy(), "draw": post["draw"].to_numpy(), "run": list(fit.forecast_ids)}
    return xr.Dataset({"final_reward": (dims, np.stack(fin, axis=-1)), "stop_step": (dims, np.stack(stop, axis=-1)),
                       "stop_reached": (dims, np.stack(reached, axis=-1))}, coords=coords)  # fmt: skip


def to_datatree(fit):
    """The fit as a self-describing ``xarray.DataTree`` (module docstring)."""
    import xarray as xr

    info_df = pd.DataFrame([vars(i) for i in fit.infos.values()]).set_index("run_id")
    groups = {
        "posterior": fit.posterior,
        "posterior_predictive": _predictive(fit),
        "observed_data": fit.runs.to_xarray(),
        "constant_data": _constant_data(fit.arrays),
        "run_info": xr.Dataset.from_dataframe(info_df).rename({"run_id": "run"}),
        "sampler_health": _health(fit),
    }
    if fit.sample_stats is not None:
        groups["sample_stats"] = fit.sample_stats
    if fit.hyper is not None:
        groups["hyperparameters"] = fit.hyper
    dt = xr.DataTree.from_dict(groups)
    dt.attrs.update(
        bayesgrpo_schema=ARTEFACT_SCHEMA, bayesgrpo_config=fit.config.model_dump_json(),
        bayesgrpo_sampler=fit.sampler.model_dump_json(), population_prior=fit.config.prior.identity,
        calibration=fit.config.calibration.identity, model_identity=fit.config.identity,
        families=json.dumps(list(fit.arrays.families)), forecast_ids=json.dumps(fit.forecast_ids),
        shape_weights=json.dumps(fit.shape_weights), bayesgrpo_version=__version__,
    )  # fmt: skip
    return dt


def write(fit, path) -> None:
    """:func:`to_datatree` to netCDF (h5netcdf), atomically: a failure leaves no partial file."""
    from bayesgrpo.io.output import atomic_path

    with atomic_path(path) as tmp:
        to_datatree(fit).to_netcdf(str(tmp), engine="h5netcdf")


def _open(path):
    import xarray as xr

    try:
        dt = xr.open_datatree(str(path), engine="h5netcdf").load()
    except (OSError, ValueError) as e:
        raise ArtefactError(f"{path}: not a readable netCDF forecast file ({type(e).__name__}: {e})") from None
    if "bayesgrpo_config" not in dt.attrs:
        raise ArtefactError(f"{path}: not a saved bayesgrpo forecast (no bayesgrpo_config attribute)")
    schema = dt.attrs.get("bayesgrpo_schema", "bayesgrpo.forecast/1")
    if schema not in READABLE_SCHEMAS:
        raise ArtefactError(
            f"{path}: saved in format {schema!r}, which this bayesgrpo ({__version__}) cannot read "
            f"(it reads {', '.join(READABLE_SCHEMAS)}); upgrade bayesgrpo or refit"
        )
    return dt, schema


def _config(dt, path, schema: str, expected) -> ForecastConfig:
    try:
        cfg = ForecastConfig.model_validate_json(dt.attrs["bayesgrpo_config"])
    except ValueError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ArtefactError(f"{path}: its model configuration cannot be read ({first})") from None
    stored = dt.attrs.get("model_identity")
    if schema == ARTEFACT_SCHEMA and stored != cfg.identity:
        raise ArtefactError(f"{path}: the model identity {stored!r} does not match its configuration "
                            f"({cfg.identity}); the file was edited or is damaged: refit")  # fmt: skip
    if expected is not None and expected.identity != cfg.identity:
        raise ArtefactError(
            f"{path}: saved by a different model (kind {cfg.kind}, prior {cfg.prior.identity}, calibration "
            f"{cfg.calibration.identity}; identity {cfg.identity}) than the one expected (kind {expected.kind}, "
            f"prior {expected.prior.identity}, calibration {expected.calibration.identity}; identity "
            f"{expected.identity})"
        )
    return cfg


def _infos(dt) -> dict:
    info_df = dt["run_info"].to_dataset().to_dataframe()
    infos = {}
    for rid, row in info_df.iterrows():
        opt = lambda k, d, f=float, row=row: f(row[k]) if k in row.index else d  # noqa: E731 - fields older files lack
        infos[str(rid)] = RunInfo(
            run_id=str(rid), s0=int(row.s0), last_step=int(row.last_step), horizon=int(row.horizon),
            interval=int(row["interval"]), loc=float(row["loc"]), scale=float(row["scale"]), n_obs=int(row["n_obs"]),
            refresh_interval=int(row.refresh_interval), model_name=str(row.model_name),
            planned=opt("planned", int(row.horizon), int), reward_min=opt("reward_min", float("nan")),
            reward_max=opt("reward_max", float("nan")),
            bounds=str(row["bounds"]) if "bounds" in row.index and isinstance(row["bounds"], str) else "",
        )  # fmt: skip
    return infos


def _arrays(dt, infos) -> ModelArrays:
    c = dt["constant_data"].to_dataset()
    run_order = [str(r) for r in c["run"].to_numpy()]
    if "refresh" in c:
        refresh = c["refresh"].to_numpy().astype(np.int64)
    else:  # format 1 stored a lag one-hot: K from the run info
        refresh = np.array([infos[r].refresh_interval for r in run_order], dtype=np.int64)
    return ModelArrays(
        y=c["y"].to_numpy(), mask=c["mask"].to_numpy(), refresh=refresh,
        **{n: c[n].to_numpy() for n in (*_CONSTANT, "channels") if n != "refresh" and n in c},
        run_ids=tuple(run_order), families=tuple(json.loads(dt.attrs["families"])),
    )  # fmt: skip


def read(path, *, expected: ForecastConfig | None = None) -> dict:
    """The parts of a saved fit (the keyword arguments of ``FittedForecast``); :class:`ArtefactError`
    for a file that is not a readable bayesgrpo forecast, of an unknown format, whose identity does not
    match its configuration, or -- with ``expected`` -- saved by a different model."""
    dt, schema = _open(path)
    cfg = _config(dt, path, schema, expected)
    infos = _infos(dt)
    hd = dt["sampler_health"].to_dataset().to_dataframe()
    children = set(dt.children)
    observed = dt["observed_data" if "observed_data" in children else "fit_data"].to_dataset()
    return dict(
        config=cfg, sampler=_sampler(dt.attrs["bayesgrpo_sampler"]),
        runs=RunSet.from_xarray(observed), infos=infos, arrays=_arrays(dt, infos),
        posterior=dt["posterior"].to_dataset(),
        hyper=dt["hyperparameters"].to_dataset() if "hyperparameters" in children else None,
        sample_stats=dt["sample_stats"].to_dataset() if "sample_stats" in children else None,
        health={str(r): {"r_hat_max": float(v.r_hat_max), "ess_min": float(v.ess_min), "divergences": int(v.divergences)}
                for r, v in hd.iterrows()},
        seconds={str(r): float(v.seconds) for r, v in hd.iterrows()},
        forecast_ids=json.loads(dt.attrs["forecast_ids"]),
        shape_weights=json.loads(dt.attrs.get("shape_weights", "{}")),
    )  # fmt: skip


def _sampler(text: str) -> SamplerConfig:
    """The sampler a saved fit was made with; a file written before the sampler retry existed was sampled
    without it (``retry=False``, not today's default)."""
    return SamplerConfig.model_validate({"retry": False, **json.loads(text)})
