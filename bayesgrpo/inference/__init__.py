"""Inference: sampler configuration, the per-process compile cache, batch sampling and sampler health."""
