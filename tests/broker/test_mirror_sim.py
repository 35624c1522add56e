"""The seeded mirroring simulation (``tests/broker/mirror_sim.py``) run as tests.

- ``test_seeds``: MIRROR_SIM_SEEDS seeds (default 2000, about 25 s on one core) from
  MIRROR_SIM_START (default 0). A failure names each failing seed and how to replay it.
- ``test_replay``: one seed, traced:
  ``MIRROR_SEED=1234 python -m pytest tests/broker/test_mirror_sim.py -k replay -s``.
- ``test_planted_*``: the checker must catch known bugs planted in the mirror core (or, for the
  HW, in the model of `Partition`) within a bounded number of seeds, so a weakened checker
  fails here instead of passing everything.

Long runs: ``python -m tests.broker.mirror_sim --seeds 100000``.
"""

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from broker.metadata.mirror_states import MirrorState
from broker.mirror.core import fetch_position, transitions, truncation, truncation_wait
from broker.mirror.core.fetch_position import Verdict
from broker.mirror.core.transitions import Step
from tests.broker import mirror_sim
from tests.broker.mirror_sim import Simulation, SimulationFailure, run_seed


def test_seeds() -> None:
    start = int(os.environ.get("MIRROR_SIM_START", "0"))
    count = int(os.environ.get("MIRROR_SIM_SEEDS", "2000"))
    failures: list[SimulationFailure] = []
    t0 = time.monotonic()
    for seed in range(start, start + count):
        try:
            run_seed(seed)
        except SimulationFailure as e:
            failures.append(e)
            print(f"mirror simulation: seed {seed} failed")
    elapsed = time.monotonic() - t0
    if failures:
        seeds = ", ".join(str(f.seed) for f in failures[:50])
        pytest.fail(
            f"{len(failures)} of {count} seeds failed ({elapsed:.0f}s): {seeds}\n\n{failures[0]}"
        )


def test_replay() -> None:
    """MIRROR_SEED=N replays seed N with a trace."""
    print(Simulation(int(os.environ.get("MIRROR_SEED", "0")), trace=True).run())


def test_the_faults_happen() -> None:
    """The seeds exercise what the checker is there for (a quiet simulation cannot pass)."""
    totals: dict[str, int] = {}
    for seed in range(200):
        for k, v in run_seed(seed).items():
            totals[k] = totals.get(k, 0) + v
    for key in ("cuts", "failovers", "failbacks", "lme_cuts", "lso_cuts", "failed"):
        assert totals[key] > 50, (key, totals)
    # the marker not yet committed when first looked at, and STOPPING done again by a new
    # leader: the window where a marker can be lost
    assert totals["marker_waits"] > 50 and totals["stopping_redone"] > 10, totals
    assert totals["appended"] > 3000, totals


# --- the checker catches planted bugs ----------------------------------------------------------


def first_failing_seed(max_seeds: int) -> SimulationFailure | None:
    for seed in range(max_seeds):
        try:
            run_seed(seed)
        except SimulationFailure as e:
            return e
    return None


@contextmanager
def planted(patch: Callable[[pytest.MonkeyPatch], None]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        patch(mp)
        yield


def test_planted_skip_the_isr_wait() -> None:
    """PREPARING leaves for MIRRORING without the other replicas having truncated."""

    def attempt(since: Any, now: float, behind: Any, **kw: Any) -> Any:
        return truncation_wait.Outcome.TRUNCATED, since, 0.0

    with planted(lambda mp: mp.setattr(truncation_wait, "attempt", attempt)):
        caught = first_failing_seed(300)
    assert caught is not None


def test_planted_skip_the_lme_truncation() -> None:
    """A failback keeps local epochs the source never mirrored from us."""
    with planted(lambda mp: mp.setattr(truncation, "lme_truncation", lambda *a: None)):
        caught = first_failing_seed(300)
    assert caught is not None


def test_planted_bump_before_truncating() -> None:
    """STOPPING starts the epoch bump before its LSO cut."""
    real = transitions.plan

    def plan(current: MirrorState, new: MirrorState, wanted: MirrorState, **kw: Any) -> Any:
        steps = list(real(current, new, wanted, **kw))
        if Step.START_BUMP in steps:
            steps.remove(Step.START_BUMP)
            steps.insert(steps.index(Step.LSO_TRUNCATE), Step.START_BUMP)
        return tuple(steps)

    with planted(lambda mp: mp.setattr(transitions, "plan", plan)):
        caught = first_failing_seed(300)
    assert caught is not None
    assert "bump" in str(caught) or "LME" in str(caught), str(caught)[:300]


def test_planted_append_past_a_diverging_epoch() -> None:
    """A Fetch answer's diverging epoch ignored: the records are taken at our end."""
    real = fetch_position.verdict

    def verdict(error_code: int, diverging_epoch: int, local_end: int, fetch_offset: int) -> Any:
        return real(error_code, -1, local_end, fetch_offset)

    with planted(lambda mp: mp.setattr(fetch_position, "verdict", verdict)):
        caught = first_failing_seed(300)
    assert caught is not None


def test_planted_truncate_without_fixing_the_hw() -> None:
    """A cut of the leader's log that leaves its high watermark where it was."""
    with planted(lambda mp: mp.setattr(mirror_sim, "FIX_HW_ON_CUT", False)):
        caught = first_failing_seed(300)
    assert caught is not None
    assert "HW" in str(caught), str(caught)[:300]


def _stopped_before_the_marker_commits(mp: pytest.MonkeyPatch) -> None:
    """The planted bug: STOPPED written as soon as the marker is appended (the HW not awaited)."""
    real = transitions.plan

    def plan(current: MirrorState, new: MirrorState, wanted: MirrorState, **kw: Any) -> Any:
        return tuple(s for s in real(current, new, wanted, **kw) if s != Step.AWAIT_MARKER)

    mp.setattr(transitions, "plan", plan)


def test_planted_stopped_before_the_marker_commits() -> None:
    """Caught where STOPPED is written."""
    with planted(_stopped_before_the_marker_commits):
        caught = first_failing_seed(300)
    assert caught is not None
    assert "marker" in str(caught), str(caught)[:300]


def test_planted_stopped_before_the_marker_commits_end_state() -> None:
    """Caught by the end state alone too (the marker lost with a leader change), without the
    check made when STOPPED is written."""

    def patch(mp: pytest.MonkeyPatch) -> None:
        _stopped_before_the_marker_commits(mp)
        mp.setattr(mirror_sim, "CHECK_MARKER_AT_STOPPED", False)

    with planted(patch):
        caught = first_failing_seed(400)
    assert caught is not None
    assert "marker" in str(caught), str(caught)[:300]


def test_the_source_model_refuses_a_fetch_with_a_diverged_epoch() -> None:
    """Sanity of the model itself: a fetch past the end of an epoch is answered diverging."""
    sim = Simulation(1)
    src = sim.source
    src.batches.clear()
    src.cache.clear()
    src.start = 0
    src.epoch = 0
    for _ in range(3):
        src.append()
    src.leader_change()
    src.append()
    end0 = src.cache[1][1]
    code, epoch, end, got = src.fetch(end0 + 1, 0)
    assert (code, epoch, end, got) == (0, 0, end0, [])
    assert fetch_position.verdict(code, epoch, end0 + 1, end0 + 1) == Verdict.RECONCILE
