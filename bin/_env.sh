# Sourced by the bin/ wrappers (not run on its own): on a fresh clone it creates .venv first
# (bin/setup.sh, its output on stderr so a tool's stdout stays clean), puts the repository on
# PYTHONPATH, and `kmirror_exec <module> [args...]` replaces the shell with `python -m <module>`
# (exec: signals reach the Python process). Never changes the directory: relative paths given
# to a tool are the caller's.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$root/.venv/bin/python"
if [ ! -x "$py" ]; then
  "$root/bin/setup.sh" >&2
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"

kmirror_exec() {
  local module="$1"
  shift
  exec "$py" -m "$module" "$@"
}
