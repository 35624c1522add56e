"""The harness the seeded simulations of our sans-IO cores share (raft_sim, replication_sim).

One ``random.Random(seed)`` per run drives everything, so a seed replays exactly. The harness
holds what does not depend on the core under test:

- ``FakeClock``: simulated milliseconds and the event queue (events due at the same time run in
  the order they were scheduled);
- ``Tracer``: the run's notable events, the last few hundred kept for a failure's report (and
  all printed when replaying one seed);
- ``Router``: the network's fault model. A message arrives 1..``max_latency`` ms later (so
  messages reorder), and while faults are on it may be dropped or duplicated, and the nodes may
  be split into groups that cannot talk. After the heal messages are only delayed;
- ``SeededSimulation``: the base of a simulation (a ``FakeClock`` itself, the trace, failures
  with their seed and replay command, and the event loop: dispatch, then check the invariants
  after every event);
- the seed loop: ``seeds_from_env`` (how many seeds, from which, out of environment variables,
  2,000 by default), ``run_seeds`` (every seed, each failure kept with its seed and replay
  command), ``first_failure`` (for the planted-bug tests) and ``cli`` (long runs).

What is checked, and which faults happen when, stays in each simulation.
"""

import argparse
import heapq
import os
import random
import sys
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

TRACE_KEEP = 400  # trace lines kept per run
REPORT_TAIL = 60  # of which a failure's report shows the last


class SimulationFailure(AssertionError):
    """A seed broke an invariant: the report names the seed, how to replay it, and the trace's
    last lines."""

    def __init__(self, what: str, seed: int, message: str, trace: Sequence[str], replay: str):
        self.seed = seed
        self.message = message
        self.trace = list(trace)
        self.replay = replay
        super().__init__(
            f"{what} seed {seed}: {message}\nreplay: {replay}\n"
            + "\n".join(self.trace[-REPORT_TAIL:])
        )


class FakeClock:
    """Simulated time in ms and the events scheduled on it."""

    __slots__ = ("_events", "_seq", "now")

    def __init__(self) -> None:
        self.now = 0
        self._events: list[tuple[int, int, int, Any]] = []
        self._seq = 0

    def push(self, at: int, kind: int, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, kind, payload))

    def next_event(self, end: int) -> tuple[int, Any] | None:
        """The next event (kind, payload), time moved to it; None when none is due by ``end``."""
        if not self._events or self._events[0][0] > end:
            return None
        at, _, kind, payload = heapq.heappop(self._events)
        self.now = at
        return kind, payload


class Tracer:
    """The run's log: kept for a failure's report, printed as it goes when ``echo``."""

    __slots__ = ("clock", "echo", "lines", "width")

    def __init__(self, clock: FakeClock, echo: bool, width: int = 7) -> None:
        self.clock = clock
        self.echo = echo
        self.width = width
        self.lines: deque[str] = deque(maxlen=TRACE_KEEP)

    def log(self, line: str) -> None:
        text = f"{self.clock.now:>{self.width}} {line}"
        self.lines.append(text)
        if self.echo:
            print(text)


class Router:
    """The network's fault model, seeded by the run's ``rng``.

    ``arrivals`` says when the copies of one message arrive: none (dropped), one, or two
    (duplicated; only when ``dup`` is given), each 1..``max_latency`` ms from now. ``group``
    partitions the nodes: messages between groups are lost (``connected``). ``heal_for_good``
    ends the faults: one group, no drops, no duplicates, delays only.
    """

    __slots__ = ("drop", "dup", "faults", "group", "max_latency", "rng")

    def __init__(
        self,
        rng: random.Random,
        nodes: Iterable[int],
        max_latency: int,
        drop: float = 0.0,
        dup: float | None = None,
    ) -> None:
        self.rng = rng
        self.max_latency = max_latency
        self.drop = drop
        self.dup = dup
        self.faults = True
        self.group: dict[int, int] = dict.fromkeys(nodes, 0)

    def latency(self) -> int:
        return 1 + self.rng.randrange(self.max_latency)

    def arrivals(self, now: int) -> list[int]:
        r = self.rng
        copies = 1
        if self.dup is not None and self.faults:
            copies += r.random() < self.dup
        out = []
        for _ in range(copies):
            if self.faults and r.random() < self.drop:
                continue
            out.append(now + 1 + r.randrange(self.max_latency))
        return out

    def connected(self, a: int, b: int) -> bool:
        return self.group[a] == self.group[b]

    def split(self, group: dict[int, int]) -> None:
        """A partition: node -> group number (a no-op once the faults are over)."""
        if self.faults:
            self.group = group

    def heal(self) -> None:
        self.group = dict.fromkeys(self.group, 0)

    def heal_for_good(self) -> None:
        self.faults = False
        self.heal()


class SeededSimulation(FakeClock, ABC):
    """A simulation's plumbing: the seed's ``rng``, the clock (it is one: ``now`` is read on
    every step, so a plain attribute), the trace, failures, the loop.

    A subclass says what it is (``what``), how to replay a seed (``replay_command``), and
    implements ``dispatch`` (one event), ``check_step`` (the invariants after every event) and
    ``settled`` (the run may stop early). ``stats`` counts what happened ("events" at least).
    """

    what = "simulation"

    def __init__(self, seed: int, trace: bool = False, trace_width: int = 7) -> None:
        super().__init__()
        self.seed = seed
        self.rng = random.Random(seed)
        self.tracer = Tracer(self, trace, trace_width)
        self.stats: dict[str, int] = {"events": 0}

    @property
    def trace(self) -> deque[str]:
        return self.tracer.lines

    def log(self, line: str) -> None:
        self.tracer.log(line)

    def replay_command(self) -> str:
        return f"python -m {type(self).__module__} --seed {self.seed} --trace"

    def fail(self, message: str) -> None:
        raise SimulationFailure(
            self.what, self.seed, f"t={self.now} {message}", self.trace, self.replay_command()
        )

    def run_events(self, end: int) -> None:
        """Run events until none is due by ``end`` or the run ``settled``; any exception from a
        core (an invariant it asserts, a refusal) fails the run with its seed."""
        while (event := self.next_event(end)) is not None:
            kind, payload = event
            self.stats["events"] += 1
            try:
                self.dispatch(kind, payload)
            except SimulationFailure:
                raise
            except Exception as e:
                self.fail(f"{type(e).__name__}: {e}")
            self.check_step()
            if self.settled():
                break

    @abstractmethod
    def dispatch(self, kind: int, payload: Any) -> None: ...

    @abstractmethod
    def check_step(self) -> None: ...

    @abstractmethod
    def settled(self) -> bool: ...


# --- the seed loop ----------------------------------------------------------------------------

DEFAULT_SEEDS = 2000


def seeds_from_env(count_var: str, start_var: str, default: int = DEFAULT_SEEDS) -> range:
    """``count_var`` seeds (``default`` when unset) from ``start_var`` (0 when unset)."""
    start = _env_int(start_var, 0)
    return range(start, start + _env_int(count_var, default))


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r} is negative")
    return value


@dataclass
class SeedReport:
    done: int = 0
    failures: list[SimulationFailure] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    worst: dict[str, int] = field(default_factory=dict)  # each stat's largest value in one seed
    elapsed: float = 0.0
    stopped_early: bool = False

    def summary(self, what: str) -> str:
        """One line per failing seed with its replay command, then the first one's report."""
        head = f"{what}: {self.done} seeds, {len(self.failures)} failed, {self.elapsed:.1f}s"
        if not self.failures:
            return head
        lines = [
            f"  seed {f.seed}: {f.message.splitlines()[0]}\n    replay: {f.replay}"
            for f in self.failures[:50]
        ]
        more = len(self.failures) - 50
        if more > 0:
            lines.append(f"  ... and {more} more")
        return "\n".join([head, *lines, "", str(self.failures[0])])


def run_seeds(
    run: Callable[[int], dict[str, int]],
    seeds: Iterable[int],
    max_seconds: float | None = None,
    on_failure: Callable[[SimulationFailure], None] | None = None,
) -> SeedReport:
    """Every seed (until ``max_seconds`` of wall time), summing their stats."""
    report = SeedReport()
    t0 = time.monotonic()
    for seed in seeds:
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            report.stopped_early = True
            break
        try:
            for k, v in run(seed).items():
                report.totals[k] = report.totals.get(k, 0) + v
                report.worst[k] = max(report.worst.get(k, v), v)
        except SimulationFailure as e:
            report.failures.append(e)
            if on_failure is not None:
                on_failure(e)
        report.done += 1
    report.elapsed = time.monotonic() - t0
    return report


def first_failure(
    run: Callable[[int], object], max_seeds: int, start: int = 0
) -> SimulationFailure | None:
    """The first seed's failure (a planted bug's test: the checker must catch it)."""
    for seed in range(start, start + max_seeds):
        try:
            run(seed)
        except SimulationFailure as e:
            return e
    return None


def cli(
    description: str,
    run: Callable[[int, argparse.Namespace], dict[str, int]],
    argv: list[str] | None = None,
    default_fault_ms: int = 8000,
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
    worst: Sequence[str] = (),
) -> int:
    """Long runs: ``--seeds N --start S`` or ``--seed N --trace``; exit 1 if any seed failed."""
    ap = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", type=int, default=1000, help="how many seeds to run")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--seed", type=int, help="run only this seed")
    ap.add_argument(
        "--fault-ms", type=int, default=default_fault_ms, help="simulated time with faults"
    )
    ap.add_argument("--max-seconds", type=float, default=600.0, help="stop after this wall time")
    ap.add_argument("--trace", action="store_true", help="print every notable event")
    if add_args is not None:
        add_args(ap)
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)

    def report_failure(e: SimulationFailure) -> None:
        print(e, file=sys.stderr)
        print(f"FAILED seed {e.seed}", file=sys.stderr)

    report = run_seeds(lambda s: run(s, args), seeds, args.max_seconds, report_failure)
    if report.stopped_early:
        print(f"stopping: --max-seconds {args.max_seconds} reached")
    print(
        f"{report.done} seeds, {len(report.failures)} failed, {report.elapsed:.1f}s; "
        f"totals {report.totals}"
    )
    for key in worst:
        print(f"worst {key}: {report.worst.get(key)}")
    return 1 if report.failures else 0
