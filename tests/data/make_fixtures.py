#!/usr/bin/env python
"""Write the committed importer fixtures under ``tests/data/`` from the real logs in
``../shared/data/log-formats`` (see that folder's README for every source file and its quirks).

    .venv/bin/python tests/data/make_fixtures.py            # rewrite tests/data/formats, grpo_small
    .venv/bin/python tests/data/make_fixtures.py --src DIR  # DIR = a log-formats folder

The tests never need ``../shared``: they read the files this script wrote and that are committed.
``tests/test_io.py::test_make_fixtures_reproduces_committed_files`` re-runs the script into a
temporary folder (when ``../shared`` is present) and compares it with the committed files.

Rules: every trimmed file is a **selection of whole lines / records / table rows / TFRecord
events of one real file**, copied byte for byte (JSON files are re-serialised in their original
layout, which the script checks reproduces the original bytes), so the quirks stay exactly as
logged. Only these
edits are made, each named in the fixture's file name and described in ``tests/data/README.md``:

* ``cut-mid-line`` / ``cut-after-N`` - the file ends inside a record / after record N (what a killed
  or still-running job leaves);
* ``tqdm-shortened`` - a run of ``\\r``-separated progress-bar redraws keeps its first and last few;
* ``stream-shortened`` - a notebook's printed (non-table) cell output keeps its first lines (and the
  notebook-level widget state, which no importer reads, is dropped).

Four files are ``synthetic_`` (no real file exists for that layout): the verl file-logger JSONL and a
verl console log with NumPy-2 ``np.float64(x)`` reprs, both built from the *real* values of the
yuzhaouoe verl log, and a GRPO ``trainer_state.json`` with evaluation and summary entries built
from real abdo-ashraf training entries. What was invented is listed in the README.

``grpo_small/`` holds six real runs in the ``../shared/data/grpo-public`` long layout, read from
the raw log-formats files with ``bayesgrpo.io.read_runs`` and subsampled (not copied from
grpo-public, whose README asks not to copy it), with grpo-public's run ids and metadata columns.
``formats/long/`` holds two of them as ``.csv.gz`` and ``.parquet``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import shutil
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def default_src() -> Path | None:
    cands = [ROOT.parent / "shared" / "data" / "log-formats"]
    if os.environ.get("BAYESGRPO_SHARED"):
        cands.insert(0, Path(os.environ["BAYESGRPO_SHARED"]) / "log-formats")
    return next((c for c in cands if c.is_dir()), None)


class Builder:
    def __init__(self, src: Path, out: Path):
        self.src = Path(src)
        self.out = Path(out)
        self.notes: list[tuple[str, str, str]] = []  # (fixture path, source file, what was kept)

    # ------------------------------------------------------------------ helpers
    def source(self, folder: str, key: str) -> Path:
        hits = [p for p in (self.src / folder).iterdir() if key in p.name]
        if len(hits) != 1:
            raise SystemExit(f"{self.src / folder}: expected one file matching {key!r}, found {hits}")
        return hits[0]

    def write(self, rel: str, data: bytes, src: Path | str, what: str) -> Path:
        p = self.out / "formats" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        self.notes.append((f"formats/{rel}", src if isinstance(src, str) else f"{src.parent.name}/{src.name}", what))
        return p

    @staticmethod
    def lines(p: Path) -> list[str]:
        return p.read_bytes().decode("utf-8").split("\n")

    @staticmethod
    def pick(lines: list[str], ranges) -> list[str]:
        """Lines whose 0-based index is in any of the inclusive ``(a, b)`` ranges, in file order."""
        keep = sorted({i for a, b in ranges for i in range(a, b + 1)})
        return [lines[i] for i in keep]

    @staticmethod
    def index_of(lines: list[str], pattern: str, nth: int = 0) -> int:
        rx = re.compile(pattern)
        hits = [i for i, ln in enumerate(lines) if rx.search(ln)]
        return hits[nth]

    # ------------------------------------------------------------------ trainer_state.json
    def trainer_state(self, key: str, name: str, select, what: str) -> None:
        p = self.source("trl_trainer_state", key)
        raw = p.read_text(encoding="utf-8")
        obj = json.loads(raw)
        assert json.dumps(obj, indent=2, sort_keys=True) + "\n" == raw, "HF layout (indent=2, sorted keys) expected"
        obj["log_history"] = select(obj["log_history"])
        self.write(f"trl_trainer_state/{name}", (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode(), p, what)

    def trainer_states(self) -> None:
        self.trainer_state(
            "IMJONEZZ",
            "old-trl_every-step_steps1-20-of-250__IMJONEZZ-UnslothGRPO__trainer_state.json",
            lambda lh: lh[:20],
            "log_history entries 1-20 of 250 (steps 1-20); top-level keys as is (max_steps 250, no best_global_step)",
        )
        self.trainer_state(
            "abdo-ashraf",
            "old-trl_every-10_steps10-100-of-250__abdo-ashraf-Gemma-3-RL-Finetuning__trainer_state.json",
            lambda lh: lh[:10],
            "log_history entries 1-10 of 25 (steps 10-100, 10-step means); top-level keys as is",
        )
        self.trainer_state(
            "srinath",
            "new-trl_entropy_no-kl_every-10_steps10-80-of-500__srinath-manda-IITD_Feb26_AAIPL__trainer_state.json",
            lambda lh: lh[:8],
            "log_history entries 1-8 of 50 (steps 10-80); new TRL keys, entropy, no kl",
        )
        self.trainer_state(
            "gauri0508",
            "new-trl_kl_bare-NaN-grad_norm_steps63-70-of-100__gauri0508-med-record__trainer_state.json",
            lambda lh: lh[62:70],
            "log_history entries 63-70 of 100 (steps 63-70); step 67 keeps its bare NaN grad_norm",
        )

        def sft(lh):
            # train 50..200, the eval entry sharing step 200, train 250; the last train entry (3750),
            # the final eval entry and the final summary entry (both at step 3765)
            return lh[:6] + lh[-3:]

        self.trainer_state(
            "edge_sft",
            "edge_sft-not-grpo_eval-entries_dup-steps_final-summary_9-of-95-entries__tasfiahmrinmoyee-Gemma3-1B-Instruct-outputs__trainer_state.json",
            sft,
            "log_history entries 1-6 and 93-95 of 95: train 50-250 with the eval entry at 200, last train 3750, eval + summary at 3765",
        )
        # synthetic: real abdo-ashraf train entries + invented eval entries + a final summary entry
        p = self.source("trl_trainer_state", "abdo-ashraf")
        obj = json.loads(p.read_text(encoding="utf-8"))
        train = obj["log_history"][:4]  # steps 10-40
        lh = []
        for e in train:
            lh.append(e)
            if e["step"] in (20, 40):
                k = e["step"] // 20
                lh.append(
                    {
                        "epoch": e["epoch"],
                        "eval_loss": 0.0001 * k,
                        "eval_reward": 0.5 * k,
                        "eval_reward_std": 0.25,
                        "eval_rewards/correctness_reward_func/mean": 0.25 * k,
                        "eval_runtime": 12.5,
                        "eval_samples_per_second": 4.0,
                        "eval_steps_per_second": 0.5,
                        "step": e["step"],
                    }
                )
        lh.append(
            {
                "epoch": train[-1]["epoch"],
                "step": 40,
                "total_flos": 0.0,
                "train_loss": 0.00012,
                "train_runtime": 456.7,
                "train_samples_per_second": 0.7,
                "train_steps_per_second": 0.088,
            }
        )
        obj["log_history"] = lh
        obj.update(global_step=40, max_steps=40, eval_steps=20)
        self.write(
            "trl_trainer_state/synthetic_grpo-eval-entries_final-summary__from-abdo-ashraf__trainer_state.json",
            (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode(),
            p,
            "SYNTHETIC layout: real train entries 10-40 of abdo-ashraf; eval entries at 20 and 40 (eval_loss 0.0001*k, "
            "eval_reward 0.5*k, eval_rewards/correctness_reward_func/mean 0.25*k, k=step/20) and the final summary are invented; "
            "global_step/max_steps 40, eval_steps 20",
        )

    # ------------------------------------------------------------------ TRL console
    @staticmethod
    def tqdm_short(line: str, head: int, tail: int) -> str:
        seg = line.split("\r")
        if len(seg) <= head + tail:
            return line
        return "\r".join(seg[:head] + seg[-tail:])

    def trl_console(self) -> None:
        # rho1.00: 40 float dicts (29 keys) in buffered bursts + final summary, logging_steps=5
        p = self.source("trl_console", "rho1.00")
        L = self.lines(p)
        tot = self.index_of(L, r"Total optimization steps")
        summ = self.index_of(L, r"^\{'train_runtime'")
        kept = self.pick(L, [(0, 2), (7, 16), (tot - 8, summ + 3)])
        kept = [self.tqdm_short(ln, 4, 4) if ln.startswith("\r") else ln for ln in kept]
        assert sum("{'loss'" in ln for ln in kept) == 40
        self.write(
            "trl_console/new-trl_vllm_entropy_float-dicts_bursts_tqdm-shortened__Sunshine535-nips-grpo-dynamics__rho1.00_seed42.log",
            "\n".join(kept).encode(),
            p,
            f"lines 1-3, 8-17 and {tot - 7}-{summ + 4} (the 'Running training' block, every metric dict, the summary, the end); "
            "model/tokenizer loading lines dropped; progress-bar lines keep their first and last 4 \\r redraws",
        )
        # gate1_adq: transformers 5, every value a string, 200 dicts printed as one block after training;
        # cut after the 60th dict (no summary), so the step can only be assumed (logging_steps=1, which is right)
        p = self.source("trl_console", "gate1_adq")
        L = self.lines(p)
        dicts = [i for i, ln in enumerate(L) if ln.startswith("{'loss'")]
        kept = [self.tqdm_short(ln, 6, 6) if ln.count("\r") > 20 else ln for ln in L[: dicts[59] + 1]]
        self.write(
            "trl_console/transformers5_string-valued-dicts_tqdm-shortened_dicts1-60-of-200_cut-after-60__Sunshine535-nips-grpo-dynamics__gate1_adq_seed42.log",
            "\n".join(kept).encode(),
            p,
            f"lines 1-{dicts[59] + 1}: start-up, training, and the first 60 of the 200 string-valued dicts (file ends there: no "
            "summary dict, no final newline); the one 31 KB progress-bar line (801 \\r redraws) keeps its first and last 6 redraws",
        )
        # Ning-Guo: 4 ranks, \r tqdm before every dict, killed by SIGHUP (no summary)
        p = self.source("trl_console", "Ning-Guo")
        L = self.lines(p)
        dicts = [i for i, ln in enumerate(L) if "{'loss'" in ln]
        death = self.index_of(L, r"death signal")
        kept = self.pick(L, [(0, dicts[8]), (death, len(L) - 1)])
        self.write(
            "trl_console/old-trl_tqdm-carriage-returns_4-ranks_steps20-180_killed__Ning-Guo-hotpotqa-agent__grpo_v2.log",
            "\n".join(kept).encode(),
            p,
            f"lines 1-{dicts[8] + 1} (4-rank start-up, the first 9 metric dicts = steps 20-180 with their tqdm redraws) "
            f"and {death + 1}-{len(L)} (the SIGHUP kill and traceback)",
        )

    # ------------------------------------------------------------------ notebooks
    @staticmethod
    def short_stream(out: dict, n: int) -> None:
        if out.get("output_type") == "stream":
            text = out["text"] if isinstance(out["text"], list) else out["text"].splitlines(True)
            joined = "".join(text).splitlines(True)
            if len(joined) > n:
                out["text"] = joined[:n]

    def notebook(self, key: str, name: str, cells, rows: int | None, what: str) -> None:
        p = self.source("unsloth_notebook", key)
        raw = p.read_text(encoding="utf-8")
        nb = json.loads(raw)
        assert json.dumps(nb, indent=2, ensure_ascii=False) + ("\n" if raw.endswith("\n") else "") == raw
        keep = []
        for ci in cells:
            c = nb["cells"][ci]
            for o in c.get("outputs", []) or []:
                self.short_stream(o, 6)
                h = (o.get("data") or {}).get("text/html")
                if h is not None and rows is not None and "<table" in "".join(h):
                    html = "".join(h)
                    body_start = html.index("<tbody>")
                    body_end = html.index("</tbody>")
                    trs = re.findall(r"\s*<tr>.*?</tr>", html[body_start + 7 : body_end], re.S)
                    html = html[: body_start + 7] + "".join(trs[:rows]) + "\n  " + html[body_end:]
                    o["data"]["text/html"] = html.splitlines(True)
            keep.append(c)
        nb["cells"] = keep
        nb.get("metadata", {}).pop("widgets", None)
        text = json.dumps(nb, indent=2, ensure_ascii=False) + ("\n" if raw.endswith("\n") else "")
        self.write(f"unsloth_notebook/{name}", text.encode(), p, what)

    def notebooks(self) -> None:
        p = self.source("unsloth_notebook", "Leen020")
        nb = json.loads(p.read_text(encoding="utf-8"))
        train = next(
            i
            for i, c in enumerate(nb["cells"])
            if any("<table" in "".join((o.get("data") or {}).get("text/html", [])) for o in c.get("outputs", []))
        )
        errs = [
            i for i, c in enumerate(nb["cells"]) if any(o.get("output_type") == "error" for o in c.get("outputs", []))
        ]
        self.notebook(
            "Leen020",
            "old-trl-keys_table_interrupted-14of50_stream-shortened__Leen020-CSE4078S25_Grp1__Gemma3_(1B)-GRPO.ipynb",
            [0] + errs + [train],
            None,
            f"cells {[0] + errs + [train]} of {len(nb['cells'])} (title, the two error outputs, the training cell with its whole 12-row table "
            "and progress bar 14/50); printed stream outputs keep their first 6 lines; notebook widget state dropped",
        )
        p = self.source("unsloth_notebook", "AbdullahFageeh")
        nb = json.loads(p.read_text(encoding="utf-8"))
        train = next(
            i
            for i, c in enumerate(nb["cells"])
            if any("<table" in "".join((o.get("data") or {}).get("text/html", [])) for o in c.get("outputs", []))
        )
        self.notebook(
            "AbdullahFageeh",
            "new-trl-keys_table_interrupted-48of100_rows1-12-of-46_stream-shortened__AbdullahFageeh-colab__Qwen3_(4B)-GRPO.ipynb",
            [0, train],
            12,
            f"cells [0, {train}] of {len(nb['cells'])}; the progress table keeps rows 1-12 of 46 (bar still 48/100); stream outputs keep their first 6 lines",
        )

    # ------------------------------------------------------------------ verl
    def verl(self) -> None:
        p = self.source("verl_console", "Bihan")
        L = self.lines(p)
        s101 = self.index_of(L, r"step:101 - ")
        s110 = self.index_of(L, r"step:110 - ")
        s111 = self.index_of(L, r"step:111 - ")
        cut = L[s111][: L[s111].index("critic/score/mean") + len("critic/sc")]
        kept = self.pick(L, [(0, 18), (s101 - 21, s110 + 6)]) + [cut]
        self.write(
            "verl_console/ppo-gae_resumed-at-101_steps101-110_cut-mid-line-in-step-111__Bihan-dstack-configs__verl_demo.log",
            "\n".join(kept).encode(),
            p,
            f"lines 1-19 (job header), {s101 - 20}-{s110 + 7} (resume from global_step_100, steps 101-110 incl. the validation "
            f"block and the val-core metric at 110), then line {s111 + 1} (step 111) cut inside the key 'critic/score/mean', no final newline",
        )
        p = self.source("verl_console", "yuzhaouoe")
        L = self.lines(p)
        steps = [i for i, ln in enumerate(L) if re.search(r"step:\d+ - ", ln)]
        err = self.index_of(L, r"ValueError: step \d+ - extract")
        kept = self.pick(
            L,
            [
                (0, 12),
                (err - 6, err + 3),
                (steps[0] - 5, steps[0] + 2),
                (steps[1] - 3, steps[1] + 1),
                (len(L) - 6, len(L) - 1),
            ],
        )
        self.write(
            "verl_console/grpo_ansi-ray-prefix_steps1-2_still-rolling-out__yuzhaouoe-GUI-Cursor-Moving__verl_demo.log",
            "\n".join(kept).encode(),
            p,
            f"lines 1-13, {err - 5}-{err + 4} (a worker traceback 'ValueError: step N - extract action failed ...', not a metric line), the step 1 and 2 metric lines with "
            f"their neighbours ({steps[0] - 4}-{steps[0] + 3}, {steps[1] - 2}-{steps[1] + 2}) and the last 5 lines (step 11 still rolling out)",
        )
        # synthetic NumPy-2 reprs and JSONL, from the real step lines of the same log
        recs = []
        for i in steps[:3]:
            body = re.sub(r"\x1b\[[0-9;]*m", "", L[i]).split("step:", 1)[1]
            st, rest = body.split(" - ", 1)
            fields = [f.split(":", 1) for f in rest.split(" - ")]
            recs.append((int(st), fields))
        prefix = "\x1b[36m(TaskRunner pid=2021996)\x1b[0m "

        def np_repr(v: str) -> str:
            return v if re.fullmatch(r"-?\d+", v) else f"np.float64({v})"

        out = [
            prefix
            + "step:0 - val-core/cursor/reward/mean@1:np.float64(0.4375) - val-aux/cursor/success/mean@1:np.float64(0.25)"
        ]
        for st, fields in recs[:2]:
            out.append(prefix + f"step:{st} - " + " - ".join(f"{k}:{np_repr(v)}" for k, v in fields))
            out.append(prefix + "Training Progress: step finished")
        self.write(
            "verl_console/synthetic_numpy2-np.float64-reprs_val-only-step-0__from-yuzhaouoe-GUI-Cursor-Moving__verl_demo.log",
            ("\n".join(out) + "\n").encode(),
            p,
            "SYNTHETIC: the real step 1-2 lines of the yuzhaouoe log with every non-integer value written as np.float64(x) "
            "(verl >= 0.4 prints pprint.pformat(v), NumPy 2 reprs); the validation-only step:0 line (values 0.4375, 0.25) and "
            "the 'Training Progress' lines are invented",
        )
        lines, elapsed = [], 0.0
        lines.append(
            json.dumps(
                {"step": 0, "data": {"val-core/cursor/reward/mean@1": 0.4375, "val-aux/cursor/success/mean@1": None}},
                separators=(",", ":"),
            )
        )
        for n, (st, fields) in enumerate(recs):
            data = {}
            for k, v in fields:
                data[k] = int(v) if re.fullmatch(r"-?\d+", v) else float(v)
            if n == 1:
                data["actor/entropy"] = None  # as orjson writes a NaN
            data["resize/mode"] = "schedule"
            elapsed += data["timing_s/step"]
            lines.append(
                json.dumps({"step": st, "data": data, "elapsed_seconds": round(elapsed, 3)}, separators=(",", ":"))
            )
        self.write(
            "verl_jsonl/synthetic_file-logger_val-only-step-0_nulls__from-yuzhaouoe-GUI-Cursor-Moving__grpo.jsonl",
            ("\n".join(lines) + "\n").encode(),
            p,
            'SYNTHETIC verl file-logger layout ({"step":N,"data":{...},"elapsed_seconds":s}, compact JSON): data of steps 1-3 = the real '
            "step lines of the yuzhaouoe log; invented: the validation-only step 0 record (0.4375 and a null), actor/entropy null at "
            "step 2 (an orjson NaN), the string metric resize/mode, elapsed_seconds = cumulative timing_s/step",
        )

    # ------------------------------------------------------------------ W&B
    def wandb(self) -> None:
        p = self.source("wandb_csv", "Hetero-RL")
        L = self.lines(p)  # no final newline: L[-1] is the last row
        kept = self.pick(L, [(0, 20), (1271, len(L) - 1)])
        self.write(
            "wandb_csv/three-runs_custom-x_quoted_rows1-20-and-1271-1295__HanlardResearch-Hetero-RL__wandb_TrainReward.csv",
            "\n".join(kept).encode(),
            p,
            "header + rows for train/global_step 1-20 and 1271-1295 (GRPO ends at 1280: 15 rows with empty GRPO cells); all fields quoted, no final newline",
        )
        p = self.source("wandb_csv", "iodt-2")
        L = self.lines(p)
        kept = self.pick(L, [(0, 30)]) + [""]
        self.write(
            "wandb_csv/one-run_no-MIN-MAX_every-10_steps10-300__iodt-2-digital-twin-composition__reward.csv",
            "\n".join(kept).encode(),
            p,
            "header + the first 30 rows (steps 10-300), unquoted, final newline",
        )

    # ------------------------------------------------------------------ TensorBoard
    @staticmethod
    def tf_records(p: Path):
        b = p.read_bytes()
        pos = 0
        while pos < len(b):
            (n,) = struct.unpack("<Q", b[pos : pos + 8])
            end = pos + 12 + n + 4
            yield b[pos:end], b[pos + 12 : pos + 12 + n]
            pos = end

    def tb_trim(self, key: str, rel: str, keep_step, what: str) -> None:
        from tensorboard.compat.proto import event_pb2

        p = self.source("tensorboard", key)
        out = []
        for rec, data in self.tf_records(p):
            e = event_pb2.Event.FromString(data)
            if e.WhichOneof("what") == "file_version" or (
                e.WhichOneof("what") == "summary" and e.step > 0 and keep_step(e.step)
            ):
                out.append(rec)
        self.write(f"tensorboard/{rel}", b"".join(out), p, what)

    def tensorboard(self) -> None:
        run = "qwen-2.5-3b-r1-countdown"
        self.tb_trim(
            "part1",
            f"{run}/Feb18_08-06-13_fdse/events.out.tfevents.1739866051.fdse.115441.0",
            lambda s: s <= 20 or s >= 630,
            "TFRecord events copied byte for byte: file_version + scalar events of steps 2-20 and 630-650 (text summaries dropped)",
        )
        self.tb_trim(
            "part2",
            f"{run}/Feb19_09-17-34_fdse/events.out.tfevents.1739956707.fdse.659406.0",
            lambda s: s >= 630,
            "file_version + scalar events of steps 630-654 (overlap with part 1: 630-650; with part 3: 652-654)",
        )
        self.tb_trim(
            "part3",
            f"{run}/Feb19_10-09-32_fdse/events.out.tfevents.1739959825.fdse.669140.0",
            lambda s: s <= 680,
            "file_version + scalar events of steps 652-680",
        )
        for key in ("one-scalar-step", "text-only"):
            p = self.source("tensorboard", key)
            orig = p.name.split("__")[-1]
            self.write(
                f"tensorboard/Qwen2-0.5B-GRPO-test/Feb12_22-04-25_DESKTOP-89G3738/{orig}",
                p.read_bytes(),
                p,
                "whole file",
            )

    # ------------------------------------------------------------------ from-scratch loops
    def scratch(self) -> None:
        p = self.source("from_scratch", "AxiomForgeAI__metrics.csv")
        L = self.lines(p)  # CRLF: every line ends with \r
        cut = L[12][: len(L[12]) // 2]
        kept = L[:12] + [cut]
        self.write(
            "from_scratch/custom-grpo_csv_sparse-eval-columns_crlf_rows1-11_cut-mid-line-in-row-12__Prem01-cyber-AxiomForgeAI__metrics.csv",
            "\n".join(kept).encode(),
            p,
            "header + iterations 1-11 (eval_* filled at 5 and 10 only), then iteration 12 cut in the middle of the line; CRLF kept",
        )
        p = self.source("from_scratch", "metrics.jsonl")
        L = self.lines(p)  # no final newline
        cut = L[11][: len(L[11]) // 2]
        self.write(
            "from_scratch/custom-grpo_jsonl_eval-only-record-0_merged-eval_nulls_iters0-10_cut-mid-line-in-11__Prem01-cyber-AxiomForgeAI__metrics.jsonl",
            "\n".join(L[:11] + [cut]).encode(),
            p,
            "records 0-10 (0 = eval-only baseline, eval keys merged into 5 and 10, null chain_* scores), then record 11 cut mid-line",
        )
        p = self.source("from_scratch", "KardeniaPoyu")
        L = self.lines(p)
        self.write(
            "from_scratch/custom-grpo_csv_all-zero-reward_steps0-39__KardeniaPoyu-SLM-RL-Comparation__grpo_metrics.csv",
            "\n".join(L[:41] + [""]).encode(),
            p,
            "header + steps 0-39 of 0-121 (success_rate 0.0 on every row)",
        )
        p = self.source("from_scratch", "minimind")
        L = self.lines(p)
        first = self.index_of(L, r"^Epoch:")
        self.write(
            "from_scratch/minimind-grpo_text-lines_steps1-40__Coicozoi-minimind-from-scratch__r1_main.log",
            "\n".join(L[: first + 40] + [""]).encode(),
            p,
            f"the {first} header lines + steps 1-40 of 500",
        )

    # ------------------------------------------------------------------ grpo_small + long formats
    def grpo_small(self) -> None:
        import warnings

        import pandas as pd

        sys.path.insert(0, str(ROOT))
        from bayesgrpo.errors import DataWarning
        from bayesgrpo.io import read_runs

        cols = ["reward", "reward_std", "kl", "completion_length"]

        def load(paths, every, **kw):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DataWarning)
                rs = read_runs(paths, **kw)
            d = rs.data
            d = d[[c for c in ["step", *cols] if c in d.columns]].copy()
            d = d.iloc[::every] if every > 1 else d
            return d.reindex(columns=["step", *cols])

        tb = [self.source("tensorboard", k) for k in ("part1", "part2", "part3")]
        hetero = self.source("wandb_csv", "Hetero-RL")
        runs = [
            # (run_id, frame, meta)
            (
                "UnslothGRPO__checkpoint-250_trainer_state__e32c3be",
                load(self.source("trl_trainer_state", "IMJONEZZ"), 5),
                dict(
                    source_repo="IMJONEZZ/UnslothGRPO",
                    source_path="outputs/checkpoint-250/trainer_state.json",
                    commit="e32c3bece15963f5349f0bfb751431f2eea38c65",
                    model="unsloth/Llama-3.1-8B-Instruct (4-bit LoRA)",
                    params_b=8.0,
                    group_size=6,
                    learning_rate=5e-6,
                    batch_size=6,
                    dataset="openai/gsm8k",
                    algorithm="GRPO (TRL/Unsloth GRPOTrainer, beta=0.04)",
                    notes="every 5th logged step (1, 6, ..., 246 of 1-250); reward = sum of 5 reward funcs",
                ),
            ),
            (
                "nips-grpo-dynamics__gates_1_2_gate1_adq_seed42__7446de7",
                load(self.source("trl_console", "gate1_adq"), 4),
                dict(
                    source_repo="Sunshine535/nips-grpo-dynamics",
                    source_path="results/gates_1_2/logs/gate1_adq_seed42.log",
                    commit="7446de749f55b2e4605212997f1c00c9f77ec788",
                    model="Qwen/Qwen3.5-9B (LoRA r=64)",
                    params_b=9.0,
                    group_size=2,
                    learning_rate=1e-4,
                    batch_size=4,
                    dataset="openai/gsm8k",
                    algorithm="GRPO (TRL) + ADQ adaptive controller",
                    notes="every 4th logged step (1, 5, ..., 197 of 1-200); reward = GSM8K correctness (0-1); transformers-5 string-valued console dicts",
                ),
            ),
            (
                "colab__Qwen3__4B_-GRPO__07a98ee",
                load(self.source("unsloth_notebook", "AbdullahFageeh"), 1),
                dict(
                    source_repo="AbdullahFageeh/colab",
                    source_path="Qwen3_(4B)-GRPO.ipynb",
                    commit="07a98eef9cce81c39d5562257bb5ad0db4748032",
                    model="unsloth/Qwen3-4B-Base",
                    params_b=4.0,
                    group_size=4,
                    learning_rate=5e-6,
                    batch_size=4,
                    dataset="open-r1/DAPO-Math-17k-Processed",
                    algorithm="GRPO (TRL GRPOTrainer via Unsloth)",
                    notes="all 46 table rows (interrupted at 48/100); near-degenerate: 19 of 46 steps at reward -7.5 with reward_std 0",
                ),
            ),
            (
                "Hetero-RL__GEPO_online__276368f",
                None,
                dict(
                    source_repo="HanlardResearch/Hetero-RL",
                    source_path="src/open_r1/GEPO_paper_plot/wandb-res/wandb_TrainReward.csv",
                    commit="276368f3c2145e9a25943110fb7b49a585ed2ff4",
                    model="",
                    params_b=float("nan"),
                    group_size=float("nan"),
                    learning_rate=float("nan"),
                    batch_size=float("nan"),
                    dataset="",
                    algorithm="GEPO (open-r1/TRL based)",
                    notes="W&B export, run [paper]GEPO_online, every 26th train/global_step (1, 27, ..., 1275 of 1-1295); reward only",
                ),
            ),
            (
                "mini-R1__qwen-2.5-3b-r1-countdown__1ef517f",
                load(tb, 12),
                dict(
                    source_repo="zzlzero/mini-R1",
                    source_path="runs/qwen-2.5-3b-r1-countdown/runs/*/events.out.tfevents.*",
                    commit="1ef517f8aa66b9821cac0e17fcd07d8dcaaf373c",
                    model="Qwen/Qwen2.5-3B-Instruct",
                    params_b=3.0,
                    group_size=8,
                    learning_rate=5e-7,
                    batch_size=float("nan"),
                    dataset="Countdown",
                    algorithm="GRPO (TRL 0.14/0.15, beta=0.001)",
                    notes="3 TensorBoard files of one resumed run merged (later file wins), every 12th logged point (steps 2, 26, ..., 1202 of 2-1210)",
                ),
            ),
            (
                "minimind-from-scratch__r1_main__5d13cb0",
                load(self.source("from_scratch", "minimind"), 10),
                dict(
                    source_repo="Coicozoi/minimind-from-scratch",
                    source_path="logs/r1_main.log",
                    commit="5d13cb028a3f2c0e766b4b6f10ec47b9b9abfb47",
                    model="MiniMind (30M)",
                    params_b=0.03,
                    group_size=float("nan"),
                    learning_rate=1e-6,
                    batch_size=float("nan"),
                    dataset="GSM8K (1K prompts)",
                    algorithm="GRPO (MiniMind R1-style rule rewards)",
                    notes="every 10th step (1, 11, ..., 491 of 1-500); kl = KL_ref, completion_length = Avg Len",
                ),
            ),
        ]
        # the W&B export holds three runs: keep only GEPO
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            g = read_runs(hetero).run("[paper]GEPO_online")
        runs[3] = (runs[3][0], g[["step", "reward"]].iloc[::26].reindex(columns=["step", *cols]), runs[3][2])
        data, meta = [], []
        for rid, d, m in runs:
            data.append(d.assign(run_id=rid)[["run_id", "step", *cols]])
            meta.append(
                dict(
                    run_id=rid,
                    **m,
                    n_points=len(d),
                    first_step=int(d["step"].iloc[0]),
                    last_step=int(d["step"].iloc[-1]),
                )
            )
        long = pd.concat(data, ignore_index=True)
        long["step"] = long["step"].astype(int)
        mcols = [
            "run_id",
            "source_repo",
            "source_path",
            "commit",
            "model",
            "params_b",
            "group_size",
            "learning_rate",
            "batch_size",
            "dataset",
            "algorithm",
            "notes",
            "n_points",
            "first_step",
            "last_step",
        ]
        gs = self.out / "grpo_small"
        gs.mkdir(parents=True, exist_ok=True)
        (gs / "runs.csv").write_text(long.to_csv(index=False, lineterminator="\n"))
        (gs / "meta.csv").write_text(pd.DataFrame(meta)[mcols].to_csv(index=False, lineterminator="\n"))
        self.notes.append(
            (
                "grpo_small/runs.csv, meta.csv",
                "six log-formats files (see meta.csv source_* columns)",
                f"{len(runs)} real runs, {len(long)} points, grpo-public long layout and metadata columns",
            )
        )
        # long-format variants: two runs as .csv.gz and .parquet
        two = long[long["run_id"].isin([runs[0][0], runs[5][0]])]
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as fh:
            fh.write(two.to_csv(index=False, lineterminator="\n").encode())
        self.write(
            "long/two-runs_from-grpo_small__runs.csv.gz",
            buf.getvalue(),
            "grpo_small/runs.csv",
            f"runs {runs[0][0]} and {runs[5][0]} of grpo_small ({len(two)} rows), gzip with mtime 0",
        )
        pq = self.out / "formats" / "long" / "two-runs_from-grpo_small__runs.parquet"
        two.reset_index(drop=True).to_parquet(pq, index=False)
        self.notes.append(
            (
                "formats/long/two-runs_from-grpo_small__runs.parquet",
                "grpo_small/runs.csv",
                "the same two runs as Parquet",
            )
        )

    # ------------------------------------------------------------------ all
    def build(self) -> None:
        for sub in ("formats", "grpo_small"):
            shutil.rmtree(self.out / sub, ignore_errors=True)
        self.trainer_states()
        self.trl_console()
        self.notebooks()
        self.verl()
        self.wandb()
        self.tensorboard()
        self.scratch()
        self.grpo_small()
        self.openrlhf()
        self.readme()

    # ------------------------------------------------------------------ OpenRLHF (synthetic)
    def openrlhf(self) -> None:
        """No real OpenRLHF log is among the log-formats files: the line layout is OpenRLHF's own
        ``logger.info(f"✨ Global step {global_step}: {log_status}")`` with invented values, ray
        actor prefixes, ANSI colour codes, progress bars between steps, NumPy-2 reprs and a None."""
        lines = []
        for k in range(1, 21):
            pre = "\x1b[36m(TrainingActor pid=4242)\x1b[0m" if k % 2 else "(TrainingActor pid=4242)"
            reward = round(0.1 + 0.6 * (1 - 0.9**k), 4)
            rl = "np.float64(%.1f)" % (200 - 3 * k) if k % 5 == 0 else "%.1f" % (200 - 3 * k)
            kl = "None" if k == 7 else "%.5f" % (0.001 * k)
            lines.append(
                f"{pre} INFO 03-05 12:{k:02d}:00 ppo_trainer.py:150] \u2728 Global step {k}: "
                f"{{'policy_loss': {0.2 - 0.005 * k:.3f}, 'reward': {reward}, 'response_length': {rl}, 'kl': {kl}}}"
            )
            lines.append(f"(TrainingActor pid=4242) Episode [1/1]: {5 * k:3d}%|#  | {k}/20 [00:{k:02d}<00:20, 1.0it/s]")
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self.write(
            "openrlhf_console/synthetic_ansi-prefix_progress-bars_np-float_none_steps1-20__openrlhf-layout__train.log",
            data,
            "(synthetic: OpenRLHF's log line layout)",
            "20 'Global step N: {...}' lines with progress bars between",
        )

    def readme(self) -> None:
        rows = []
        for rel, src, what in self.notes:
            first = rel.split(", ")[0]
            size = (self.out / first).stat().st_size if (self.out / first).exists() else 0
            rows.append(f"| `{rel}` | {size} | `{src}` | {what} |")
        text = (
            "# tests/data - committed fixtures (written by `make_fixtures.py`; do not edit by hand)\n\n"
            "Trimmed copies of the real logs in `../shared/data/log-formats` (one per format and quirk; the README there\n"
            "describes every source file) and six real runs in the grpo-public long layout (`grpo_small/`). The importer\n"
            "tests read only these files. Regenerate with `.venv/bin/python tests/data/make_fixtures.py`; see the script's\n"
            "docstring for the rules (whole lines/records copied byte for byte; edits named in the file name).\n\n"
            "| fixture | bytes | source (log-formats/…) | kept |\n|---|---:|---|---|\n" + "\n".join(rows) + "\n"
        )
        (self.out / "README.md").write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=None, help="a log-formats folder (default: ../shared/data/log-formats)")
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: tests/data)")
    a = ap.parse_args(argv)
    src = a.src or default_src()
    if src is None or not src.is_dir():
        print("make_fixtures: ../shared/data/log-formats not found; pass --src DIR", file=sys.stderr)
        return 2
    b = Builder(src, a.out)
    b.build()
    total = sum(f.stat().st_size for f in a.out.rglob("*") if f.is_file())
    print(f"wrote {len(b.notes)} fixture entries to {a.out} ({total} bytes in {a.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
