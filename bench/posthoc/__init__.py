"""Post-hoc layers that ship in no default (research, kept for the studies that measured them):
the hazard of leaving the regime (:mod:`bench.posthoc.hazard`) and the conditioned interval layer
(:mod:`bench.posthoc.intervals`). They act on a fitted forecast's final draws, outside the package."""
