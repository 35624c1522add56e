"""`replication.Partition` owns every change to a partition log (issue 28): appends, cuts and
log-start moves go through it, so the high watermark is fixed and waiters are woken in one place.

An AST scan of ``broker/``: outside ``broker/log``, ``broker/replication`` and the metadata-log
adapter, no call of a log-changing method on something that is a `PartitionLog` by how it was
reached (``x.log``, ``get_log(...)``, a name bound from either, a ``plog`` name, or a parameter or
variable annotated ``PartitionLog``). The scan is tested on planted violations below, so it
cannot pass by finding nothing.
"""

import ast
import asyncio
import re
import time
import uuid
from pathlib import Path
from typing import Any

from broker.log.clock import ManualClock
from broker.log.config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.replication.partition import sole_leader
from protocol.records import Record, build_batch

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "broker"

# Owners: the log itself, the replication layer (Partition, the follower's ReplicaLog), and
# the metadata log adapter of the Raft quorum (its log is a PartitionLog under Raft's rules).
# broker/raft's ``log`` is its own log interface, which that adapter implements (the Raft core
# cannot import broker.log: an import-linter contract).
ALLOWED = (
    "broker/log/",
    "broker/replication/",
    "broker/quorum/metadata_log.py",
    "broker/raft/",
)

CHANGES = frozenset(
    {
        "truncate_to",
        "truncate_fully_and_start_at",
        "delete_records_before",
        "append_raw",
        "append_as_leader",
        "append_txn_marker",
    }
)


def _annotation_names(ann: ast.expr | None) -> set[str]:
    """The identifiers an annotation names, quoted ones included."""
    if ann is None:
        return set()
    names: set[str] = set()
    for n in ast.walk(ann):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.Attribute):
            names.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            names.update(re.findall(r"\w+", n.value))
    return names


def _is_log_expr(e: ast.expr, log_names: set[str]) -> bool:
    if isinstance(e, ast.Attribute) and e.attr in ("log", "plog", "_plog"):
        return True
    if isinstance(e, ast.Name) and (e.id in log_names or "plog" in e.id):
        return True
    if isinstance(e, ast.Call):
        f = e.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return name in ("get_log", "_live_log")
    return False


def _function_violations(fn: ast.AST) -> list[tuple[int, str]]:
    log_names: set[str] = set()
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]:
            if "PartitionLog" in _annotation_names(a.annotation):
                log_names.add(a.arg)
    nodes = list(ast.walk(fn))
    for node in nodes:  # names bound to a log anywhere in the function
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and "PartitionLog" in _annotation_names(node.annotation)
        ):
            log_names.add(node.target.id)
    for _ in range(2):  # x = hosted.log; y = x
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is not None and _is_log_expr(node.value, log_names):
                    log_names.update(t.id for t in targets if isinstance(t, ast.Name))
    out = []
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CHANGES
            and _is_log_expr(node.func.value, log_names)
        ):
            out.append((node.lineno, node.func.attr))
    return out


def violations(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            found.update(_function_violations(node))
    return sorted(found)


def test_only_the_owners_change_partition_logs() -> None:
    bad = []
    scanned = 0
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(ALLOWED):
            continue
        scanned += 1
        for line, name in violations(path.read_text()):
            bad.append(f"{rel}:{line}: {name} on a PartitionLog (go through Partition)")
    assert scanned > 100
    assert not bad, "\n".join(bad)


def test_the_scan_finds_planted_cuts() -> None:
    planted = """
from broker.log.partition_log import PartitionLog

def a(hosted):
    hosted.log.truncate_to(3)

def b(part):
    plog = part.log
    plog.truncate_fully_and_start_at(7)

def c(x: PartitionLog) -> None:
    x.delete_records_before(1)

def d(self, p):
    lg = self.get_log(p.topic, p.partition)
    lg.append_raw(b"")

def e(hosted):
    y: "PartitionLog | None" = None
    y.truncate_to(0)

def fine(part):
    part.truncate_to(3)  # the Partition: allowed
    part.delete_records_before(2)
"""
    found = violations(planted)
    assert [name for _, name in found] == [
        "truncate_to",
        "truncate_fully_and_start_at",
        "delete_records_before",
        "append_raw",
        "truncate_to",
    ]


def _leader(tmp_path: Path) -> Any:
    clock = ManualClock(int(time.time() * 1000))
    plog = PartitionLog.open(tmp_path, "t", 0, uuid.uuid4(), LogConfig(), clock)
    part = sole_leader(plog, clock.now_ms)
    for _ in range(3):
        part.append_records(build_batch([Record(key=None, value=b"x")] * 2))
    plog.drain_writes()
    part.leader.on_append(clock.now_ms())
    return part


def test_a_cut_through_the_partition_brings_the_hw_down_and_wakes_waiters(tmp_path: Path) -> None:
    async def run() -> None:
        part = _leader(tmp_path)
        assert part.leader.high_watermark == part.log.high_watermark == 6
        waiter = asyncio.get_running_loop().create_future()
        part.add_waiter(waiter)
        seq = part.change_seq
        assert part.truncate_to(4)
        assert part.log.log_end_offset == 4
        assert part.leader.high_watermark == part.log.high_watermark == 4
        assert waiter.done() and part.change_seq > seq
        part.truncate_fully_and_start_at(10)
        assert part.log.log_start_offset == part.log.log_end_offset == 10
        assert part.leader.high_watermark == 10
        # appends continue at the new end, and the HW follows them (an ISR of one)
        part.append_records(build_batch([Record(key=None, value=b"y")]))
        part.log.drain_writes()
        part.leader.on_append(0)
        assert part.leader.high_watermark == 11

    asyncio.run(run())


def test_delete_records_through_the_partition_wakes_waiters(tmp_path: Path) -> None:
    async def run() -> None:
        part = _leader(tmp_path)
        waiter = asyncio.get_running_loop().create_future()
        part.add_waiter(waiter)
        assert part.delete_records_before(2) == 2
        assert part.log.log_start_offset == 2 and waiter.done()

    asyncio.run(run())
