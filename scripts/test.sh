#!/usr/bin/env bash
# Set up (if needed, with the test extras), check the house rules, then run the test suite.
# Extra arguments go to pytest (e.g. -m "not slow" for the quick loop).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/env.sh" test
cd "$ROOT"
# the house rules before any test (each configured in pyproject.toml): the layer order and no import
# cycles ([tool.importlinter]), lint and format ([tool.ruff]), types ([tool.mypy])
"$ROOT/.venv/bin/lint-imports" --no-cache
"$ROOT/.venv/bin/ruff" check --no-cache .
"$ROOT/.venv/bin/ruff" format --check --no-cache .
"$ROOT/.venv/bin/mypy"
exec "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
