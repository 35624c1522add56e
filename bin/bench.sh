#!/usr/bin/env bash
# The benchmarks, in the project venv (set up on first use, as every bin/ tool):
#   bin/bench.sh                  all of bench/run.sh
#   bin/bench.sh NAME [args...]   one: python -m bench.NAME, e.g. mirror_fetch_bench, audit_bench
#   bin/bench.sh --check          the performance guard: short forms, ratios against floors
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
usage() {
  echo "USAGE: bin/bench.sh [NAME [args...]]   (no NAME: every benchmark of bench/run.sh)"
  echo "       bin/bench.sh --check [-k TEXT]   the performance guard (ratios against floors)"
  echo "NAME is one of:"
  for f in "$root"/bench/*_bench.py; do
    n="$(basename "$f" .py)"
    echo "  $n"
  done
}
case "${1:-}" in
  "") exec "$root/bench/run.sh" ;;
  -h | --help) usage; exit 0 ;;
  --check) shift; kmirror_exec bench.check "$@" ;;
esac
name="${1#bench.}"
shift
if [ ! -f "$root/bench/$name.py" ]; then
  echo "bin/bench.sh: no benchmark named $name (bench/$name.py)" >&2
  usage >&2
  exit 1
fi
kmirror_exec "bench.$name" "$@"
