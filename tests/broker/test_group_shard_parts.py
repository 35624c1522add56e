"""`GroupShard` is composed of parts that never import it (only the coordinator above does; the
tree-wide cycle check is tests/test_import_cycles.py), and a part's timers run on the part of the
shard current when they fire."""

from collections.abc import Callable
from dataclasses import dataclass, field

from broker.coordinator.group.timers import PartTimers
from broker.coordinator.runtime import WriteResult
from tests.test_import_cycles import PACKAGES, ROOT, import_graph

GROUP = "broker.coordinator.group"


def test_only_the_coordinator_imports_the_group_shard() -> None:
    # the parts do not know their host (tests/test_import_cycles.py rules out cycles tree-wide)
    graph = import_graph(ROOT, PACKAGES)
    shard = GROUP + ".shard"
    assert shard in graph
    importers = {
        src
        for src, dsts in graph.items()
        if (src == GROUP or src.startswith(GROUP + ".")) and shard in dsts
    }
    assert importers == {GROUP + ".coordinator"}


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
