#!/usr/bin/env bash
# Set up (if needed, with the test extras), check the house rules, then run the test suite.
# Extra arguments go to pytest (e.g. -m "not slow" for the quick loop).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/env.sh" test
cd "$ROOT"
# the layer order and no import cycles (the contracts in pyproject.toml, [tool.importlinter])
"$ROOT/.venv/bin/lint-imports" --no-cache
exec "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
