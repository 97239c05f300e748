#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: find a Python >= 3.12 (PyMC 6 refuses 3.11,
# and an older python3 would silently resolve PyMC 5), create .venv, install the package.
# Re-running is cheap: the install is skipped while pyproject.toml and the extras are unchanged.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-}"

py_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

find_python() {
  local c
  for c in "${BAYESGRPO_PYTHON:-}" python3.13 python3.12 python3; do
    [ -n "$c" ] || continue
    if command -v "$c" >/dev/null 2>&1 && py_ok "$(command -v "$c")"; then command -v "$c"; return 0; fi
  done
  local roots=()
  command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root)/versions")
  roots+=("$HOME/.pyenv/versions" "/root/.pyenv/versions" "/usr/local/bin" "/opt/python")
  for r in "${roots[@]}"; do
    for c in "$r"/3.13*/bin/python3 "$r"/3.12*/bin/python3 "$r"/python3.13 "$r"/python3.12; do
      if [ -x "$c" ] && py_ok "$c"; then echo "$c"; return 0; fi
    done
  done
  return 1
}

if [ -x "$VENV/bin/python" ] && ! py_ok "$VENV/bin/python"; then
  echo "[bayesgrpo] .venv uses Python < 3.12; recreating it" >&2
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  PY="$(find_python)" || { echo "[bayesgrpo] error: no Python >= 3.12 found (tried python3.13, python3.12, python3, pyenv). Install one or set BAYESGRPO_PYTHON=/path/to/python3.12" >&2; exit 1; }
  echo "[bayesgrpo] creating .venv with $PY ($("$PY" --version))" >&2
  "$PY" -m venv "$VENV"
fi

STAMP="$VENV/.bayesgrpo-install-${EXTRAS:-base}"
# the test set-up pins the stack the bit-for-bit tests were recorded with (scripts/constraints-test.txt),
# so the suite runs the same on any machine on any day, whatever pip would resolve newest
CONSTRAINTS=()
[ "$EXTRAS" = "test" ] && CONSTRAINTS=(-c "$ROOT/scripts/constraints-test.txt")
WANT="$(cat "$ROOT/pyproject.toml" ${CONSTRAINTS[1]:+"${CONSTRAINTS[1]}"} | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[bayesgrpo] installing bayesgrpo${EXTRAS:+[$EXTRAS]} into .venv (first time: about 1-2 minutes)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  # setuptools' "Editable installation" notice (a box of stars on every editable install) is information
  # only: it is dropped with pip's other noise
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${CONSTRAINTS[@]}" -e "$ROOT${EXTRAS:+[$EXTRAS]}" 2>&1 \
    | awk '/Editable installation\./ {box = 1} !box && !/^WARNING: Location/ && !/is ignored: it is neither/ {print} /with strategy, WheelFile/ {box = 0}' >&2 || true
  "$VENV/bin/python" -c "import bayesgrpo, pymc; assert int(pymc.__version__.split('.')[0]) >= 6, pymc.__version__" \
    || { echo "[bayesgrpo] error: installation failed (see messages above)" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
fi

# The browser tests of the HTML report (tests/test_report_browser.py) drive Debian's Chromium through
# Playwright (never Playwright's own browser download): install it when it is missing.
if [ "$EXTRAS" = "test" ] && [ -z "${BAYESGRPO_NO_BROWSER:-}" ] && ! [ -x "${BAYESGRPO_CHROMIUM:-/usr/bin/chromium}" ]; then
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; }; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    echo "[bayesgrpo] installing Debian's chromium for the browser tests (apt-get; about a minute)" >&2
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } >/dev/null \
      || echo "[bayesgrpo] warning: could not install chromium; the browser tests will fail (BAYESGRPO_NO_BROWSER=1 skips them)" >&2
  else
    echo "[bayesgrpo] warning: no chromium and no apt-get/root to install it; the browser tests will fail (BAYESGRPO_NO_BROWSER=1 skips them)" >&2
  fi
fi
