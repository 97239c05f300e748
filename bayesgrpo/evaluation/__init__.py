"""Evaluation: scoring metrics, peer forecasters and the backtest harness."""
