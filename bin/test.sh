#!/usr/bin/env bash
# The whole test suite: set-up, static checks (ruff, mypy, import-linter contracts), then pytest.
# Extra arguments go to pytest (e.g. bin/test.sh -k registry).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin/setup.sh
. .venv/bin/activate
echo "== ruff"; ruff check protocol broker audit tests bench
echo "== ruff format"; ruff format --check protocol broker audit tests bench
echo "== mypy"; mypy protocol broker audit
echo "== import-linter"; lint-imports
echo "== pytest"; python -m pytest -q "$@"
