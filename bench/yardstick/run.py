"""Every ledger of the yardstick, in order, each stage resumable (a source's ledger is written whole).

nice .venv/bin/python -m bench.yardstick.run            # fits, kinds, evidence, peers, curves
nice .venv/bin/python -m bench.yardstick.run --fresh-kinds   # after the selection sources changed: the
                                                        # priors of every case change, so the kinds'
                                                        # ledgers and evidence are recomputed
"""

from __future__ import annotations

import argparse
import shutil

from bench.yardstick import run_curves, run_kinds, run_peers, store

KINDS = ("oscillator", "degeneracy")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fresh-kinds", action="store_true")
    a = ap.parse_args(argv)
    if a.fresh_kinds:
        for k in KINDS:
            for name in (k, f"{k}_evidence"):
                shutil.rmtree(store.LEDGERS / name, ignore_errors=True)
    run_kinds.main(["--stage", "fits"])
    run_kinds.main(["--stage", "kinds", *[x for k in KINDS for x in ("--kind", k)]])
    run_kinds.main(["--stage", "evidence", *[x for k in KINDS for x in ("--kind", k)]])
    run_peers.main([])
    run_curves.main([])


if __name__ == "__main__":
    main()
