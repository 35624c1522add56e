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
# The suite runs on two workers (pytest-xdist; a file's tests stay on one worker, so module
# fixtures start once); the tests that measure time or throughput (marked serial) run alone
# afterwards, so the other worker's load does not skew them. KMIRROR_TEST_WORKERS=0: one process.
# --durations lists the slowest tests of each phase (where the suite's time goes).
workers="${KMIRROR_TEST_WORKERS:-2}"
echo "== pytest (parallel, $workers workers)"
parallel=(-n "$workers" --dist loadfile)
[ "$workers" = 0 ] && parallel=()
rc=0; python -m pytest -q --durations=30 "${parallel[@]}" -m "not serial" "$@" || rc=$?
[ "$rc" = 5 ] && rc=0  # exit 5: no test selected (e.g. only serial ones were named)
[ "$rc" = 0 ] || exit "$rc"
echo "== pytest (serial)"
rc=0; python -m pytest -q --durations=10 -m serial "$@" || rc=$?
[ "$rc" = 5 ] && rc=0
exit "$rc"
