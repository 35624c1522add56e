"""The seeded replication simulation (``tests/broker/replication_sim.py``) run as tests.

- ``test_seeds``: REPL_SIM_SEEDS seeds (default 2000) from REPL_SIM_START (default 0). A
  failure names each failing seed and how to replay it (the seed loop is
  ``tests/broker/sim_harness.py``).
- ``test_replay``: one seed, traced:
  ``REPL_SEED=1234 python -m pytest tests/broker/test_replication_sim.py -k replay -s``
  (seed 0 without REPL_SEED, so the path stays tested).
- ``test_planted_*``: the checker must catch known bugs planted in the cores within a bounded
  number of seeds, so a weakened checker fails here instead of passing everything. Each stops
  at the first catch; the bounds are several times the seed that catches each bug today.

Long runs: ``python -m tests.broker.replication_sim --seeds 100000 --max-seconds 3600``.
"""

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kio.schema.errors import ErrorCode

from broker.replication import follower_state, leader_epochs, partition_state
from broker.replication.isr import CommittedIsr
from broker.replication.partition_state import LeaderPartitionState
from broker.replication.truncation import Truncation
from tests.broker.replication_sim import Simulation, SimulationFailure, run_seed
from tests.broker.sim_harness import first_failure, run_seeds, seeds_from_env


def test_seeds() -> None:
    report = run_seeds(run_seed, seeds_from_env("REPL_SIM_SEEDS", "REPL_SIM_START"))
    if report.failures:
        pytest.fail(report.summary("replication simulation"))


def test_replay() -> None:
    """REPL_SEED=N replays seed N with a trace."""
    stats = Simulation(int(os.environ.get("REPL_SEED", "0")), trace=True).run()
    print(stats)


def test_the_faults_happen() -> None:
    """The seeds exercise what the checker is there for (so a quiet simulation cannot pass)."""
    report = run_seeds(run_seed, range(200))
    assert not report.failures, report.summary("replication simulation")
    totals = report.totals
    for key in ("lossy", "truncations", "refused", "elections", "alters"):
        assert totals[key] > 50, (key, totals)
    for key in ("resets", "deletes"):  # DeleteRecords runs in a quarter of the seeds
        assert totals[key] > 5, (key, totals)
    assert totals["acked"] > 10_000, totals
    assert totals["lost_records"] > 1000, totals


# --- the checker catches planted bugs ----------------------------------------------------------


def first_failing_seed(max_seeds: int) -> SimulationFailure | None:
    return first_failure(run_seed, max_seeds)


@contextmanager
def planted(patch: Callable[[pytest.MonkeyPatch], None]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        patch(mp)
        yield


def test_planted_pending_change_forgotten_on_metadata() -> None:
    """Kafka 3.9's makeLeader: metadata with our own partition epoch resets a pending ISR
    expansion still in flight, so the HW passes a replica the controller then adds."""
    orig = LeaderPartitionState.become_leader

    def become_leader(self: LeaderPartitionState, now_ms: int, reg: object) -> bool:
        if reg.partition_epoch >= self.partition_epoch:  # type: ignore[attr-defined]
            self.isr_state = CommittedIsr(frozenset(reg.isr))  # type: ignore[attr-defined]
        return orig(self, now_ms, reg)  # type: ignore[arg-type]

    with planted(lambda mp: mp.setattr(LeaderPartitionState, "become_leader", become_leader)):
        caught = first_failing_seed(2000)
    assert caught is not None


def test_planted_leader_without_divergence_check() -> None:
    """A leader serving records without checking the follower's last fetched epoch."""
    with planted(
        lambda mp: mp.setattr(partition_state, "diverging_epoch", lambda *args: leader_epochs.AGREE)
    ):
        caught = first_failing_seed(200)
    assert caught is not None


def test_planted_truncation_ignoring_the_leader_end() -> None:
    """A follower truncating to the end of its own epoch, not min(ours, the leader's)."""

    def truncation(log, log_end, epoch, leader_end, fetch_offset):  # type: ignore[no-untyped-def]
        _, our_end = log.end_offset_for_epoch(epoch)
        return Truncation(min(our_end, log_end), True)

    with planted(
        lambda mp: mp.setattr(follower_state, "truncation_for_diverging_epoch", truncation)
    ):
        caught = first_failing_seed(500)
    assert caught is not None


def test_planted_ack_at_the_leader_end() -> None:
    """acks=all answered once the leader has the records, not once the HW covers them."""

    def acks_all_done(self: LeaderPartitionState, required: int) -> tuple[bool, ErrorCode]:
        if not self.is_leader:
            return False, ErrorCode.not_leader_or_follower
        return self.log.log_end_offset >= required, ErrorCode.none

    with planted(lambda mp: mp.setattr(LeaderPartitionState, "acks_all_done", acks_all_done)):
        caught = first_failing_seed(50)
    assert caught is not None
    assert "not committed" in str(caught)


def test_planted_hw_without_the_maximal_isr() -> None:
    """The HW over the committed ISR only: a pending expansion's replica is not waited for."""
    with planted(
        lambda mp: mp.setattr(
            partition_state.PendingIsrChange, "maximal", property(lambda self: self.committed)
        )
    ):
        caught = first_failing_seed(2000)
    assert caught is not None


def test_planted_hw_not_frozen_under_min_isr() -> None:
    """The HW advancing while the ISR is under min.insync.replicas."""
    with planted(
        lambda mp: mp.setattr(LeaderPartitionState, "effective_min_isr", property(lambda s: 1))
    ):
        caught = first_failing_seed(200)
    assert caught is not None
