"""Collecting development runs from public repositories into ``data/grpo-collected`` (see README.md)."""
