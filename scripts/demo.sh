#!/usr/bin/env bash
# Set up (if needed) and forecast the shipped example run from its first 150 steps:
# prints the forecast table and writes out/demo/forecast.csv and out/demo/example-grpo-run.png.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/env.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/bayesgrpo" demo "$@"
