"""The performance guard: short forms of the benches, each ratio against its floor.

Run with ``bin/bench.sh --check`` (CI runs it after the test suite; about 5 minutes on two
cores). Ratios measured within one run, not absolute rates, so a slower machine does not fail
it; the one absolute bound (failover time) has twice the headroom of today's figure. A case that
misses its floor runs once more (the machine may have been busy) and fails only if it misses
again. Exit 0 when every case meets its floor, 1 otherwise; each case's full output is kept in
the work directory printed at the end when anything failed.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    name: str
    bench: str  # module under bench/
    args: tuple[str, ...]
    measure: Callable[[Any], float]  # from the bench's --json document
    floor: float
    higher_is_better: bool = True
    unit: str = "x"

    def meets(self, value: float) -> bool:
        return value >= self.floor if self.higher_is_better else value <= self.floor


def _restart_growth(rows: list[dict[str, float]]) -> float:
    """Restart time at the largest size over the smallest, with 0.5 s of slack for noise on
    restarts that take well under a second (a flat restart stays near 1)."""
    small, large = rows[0]["metadata_s"], rows[-1]["metadata_s"]
    return max(large - 0.5, small) / small


CASES = (
    # measured on 2 idle cores: 0.51
    Case(
        "produce acks=all RF=3 / RF=1",
        "replication_bench",
        ("--seconds", "3", "--rounds", "2"),
        lambda d: d["ratio"],
        0.45,
    ),
    # measured: 0.72
    Case(
        "mirror copy / raw fetch+append",
        "mirror_bench",
        ("--quick", "--mb", "60"),
        lambda d: d[0]["ours"] / d[0]["baseline"],
        0.6,
    ),
    # measured: 1.5 s
    Case(
        "failover of 2,000 mirrored partitions, 3 nodes",
        "mirror_failover_bench",
        ("--partitions", "2000"),
        lambda d: d["failover_s"],
        2.5,
        False,
        "s",
    ),
    # restart time growth from 64 to 256 MiB of log (flat: 1.0)
    Case(
        "kill -9 restart, 256 MiB / 64 MiB of log",
        "restart_bench",
        ("--sizes", "64,256", "--commits", "100"),
        _restart_growth,
        1.5,
        False,
    ),
    # consume speed against Tansu with responses of equal size (see the bench's docstring)
    Case(
        "consume kmirror / Tansu, equal responses",
        "peer_consume_bench",
        ("--records", "500000", "--rounds", "2"),
        lambda d: d["rows"][1]["kmirror"] / d["rows"][1]["tansu"],
        0.8,
    ),
)


def run_case(case: Case, workdir: Path, attempt: int) -> tuple[float | None, str]:
    out = workdir / f"{case.bench}-{attempt}.json"
    log = workdir / f"{case.bench}-{attempt}.log"
    with log.open("w") as sink:
        proc = subprocess.run(
            [sys.executable, "-m", f"bench.{case.bench}", *case.args, "--json", str(out)],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
        )
    if proc.returncode != 0 or not out.exists():
        return None, f"exit {proc.returncode}, see {log}"
    return case.measure(json.loads(out.read_text())), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="only", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-bench-check-"))
    started = time.perf_counter()
    failed = 0
    print(f"{'case':<50} {'measured':>9} {'floor':>8}  verdict", flush=True)
    for case in CASES:
        if args.only and args.only not in case.name:
            continue
        for attempt in (1, 2):
            value, why = run_case(case, workdir, attempt)
            if value is not None and case.meets(value):
                break
        sign = ">=" if case.higher_is_better else "<="
        shown = "error" if value is None else f"{value:.2f}{case.unit}"
        verdict = "ok" if value is not None and case.meets(value) else f"MISS {why}".strip()
        if not verdict.startswith("ok"):
            failed += 1
        print(f"{case.name:<50} {shown:>9} {sign}{case.floor:>5}{case.unit}  {verdict}", flush=True)
    print(f"({time.perf_counter() - started:.0f} s; outputs in {workdir})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
