"""`GroupShard` is composed of parts that never import it: no import cycle in the group package
(counting TYPE_CHECKING imports, as `ruff analyze graph` does), and a part's timers run on the
part of the shard current when they fire."""

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.coordinator.group.timers import PartTimers
from broker.coordinator.runtime import WriteResult

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "broker/coordinator/group/"


def _group_graph() -> dict[str, set[str]]:
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "analyze", "graph", "broker"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        text=True,
        timeout=120,
    ).stdout
    graph: dict[str, list[str]] = json.loads(out)
    return {
        src: {dst for dst in dsts if dst.startswith(PACKAGE)}
        for src, dsts in graph.items()
        if src.startswith(PACKAGE)
    }


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w in graph), None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [{"a", "b", "c"}]


def test_group_package_has_no_import_cycle() -> None:
    graph = _group_graph()
    assert PACKAGE + "shard.py" in graph
    assert _cycles(graph) == []
    # the parts do not know their host: only the coordinator above imports the shard
    importers = {src for src, dsts in graph.items() if PACKAGE + "shard.py" in dsts}
    assert importers == {PACKAGE + "coordinator.py"}


@dataclass
class _Part:
    name: str
    seen: list[str] = field(default_factory=list)

    def fire(self, what: str) -> WriteResult[None]:
        self.seen.append(what)
        return WriteResult(None)


@dataclass
class _Shard:
    part: _Part


@dataclass
class _Ctx:
    """A ShardContext's timer surface: keeps the op so the test fires it on a shard."""

    ops: dict[str, Callable[[_Shard], object]] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)

    def now_ms(self) -> int:
        return 42

    def schedule(self, key: str, delay_ms: int, op: Callable[[_Shard], object]) -> None:
        self.ops[key] = op

    def cancel(self, key: str) -> None:
        self.cancelled.append(key)
        self.ops.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.ops


def test_part_timers_run_on_the_part_of_the_shard_they_fire_on() -> None:
    ctx = _Ctx()
    timers: PartTimers[_Shard, _Part] = PartTimers(ctx, lambda s: s.part)  # type: ignore[arg-type]
    timers.schedule("k", 10, lambda p: p.fire("expired"))
    assert timers.is_scheduled("k") and timers.now_ms() == 42
    # the runtime rebuilt the shard since: the op acts on the new shard's part, not the old one
    old, new = _Part("old"), _Part("new")
    ctx.ops["k"](_Shard(new))
    assert (old.seen, new.seen) == ([], ["expired"])
    timers.cancel("k")
    assert not timers.is_scheduled("k") and ctx.cancelled == ["k"]
