"""The mirror core's decisions (broker/mirror/core), without a log, a socket or a loop."""

from dataclasses import dataclass

from broker.metadata.mirror_states import MirrorState as S
from broker.mirror.core import fetch_position, truncation
from broker.mirror.core.fetch_position import Verdict
from broker.mirror.core.transitions import Step, plan
from broker.mirror.core.truncation_wait import Outcome, attempt


@dataclass(frozen=True)
class B:
    base_offset: int
    last_offset: int
    position: int
    size: int
    is_control: bool = False


def _batches(*ranges: tuple[int, int], size: int = 100) -> list[B]:
    return [B(a, b, i * size, size) for i, (a, b) in enumerate(ranges)]


def test_verdicts() -> None:
    assert fetch_position.verdict(1, -1, 5, 5) == Verdict.RECONCILE
    assert fetch_position.verdict(6, -1, 5, 5) == Verdict.PARK
    assert fetch_position.verdict(0, -1, 4, 5) == Verdict.REFETCH  # cut under the request
    assert fetch_position.verdict(0, 3, 5, 5) == Verdict.RECONCILE  # never past a divergence
    assert fetch_position.verdict(0, -1, 5, 5) == Verdict.RECORDS


def test_append_skips_what_we_hold_and_splits_at_segment_size() -> None:
    plan_ = fetch_position.plan_append(
        _batches((0, 4), (5, 9), (10, 14), (15, 19)), 5, 0, 250, lambda b: None
    )
    assert plan_.cut_to == -1 and plan_.first_offset == 5 and plan_.size == 300
    assert plan_.chunks == ((100, 300), (300, 400))


def test_a_batch_straddling_our_end_cuts_back_to_it() -> None:
    p = fetch_position.plan_append(_batches((0, 9)), 5, 0, 1 << 20, lambda b: None)
    assert (p.cut_to, p.restart, p.chunks) == (0, False, ((0, 100),))
    # our log holds nothing (its start is its end): restart at the batch
    p = fetch_position.plan_append(_batches((0, 9)), 5, 5, 1 << 20, lambda b: None)
    assert (p.cut_to, p.restart) == (0, True)


def test_an_unreadable_control_batch_stops_the_partition_after_what_precedes_it() -> None:
    bs = [B(0, 4, 0, 100), B(5, 5, 100, 50, is_control=True), B(6, 9, 150, 100)]
    p = fetch_position.plan_append(bs, 0, 0, 1 << 20, lambda b: "unknown type 7")
    assert p.chunks == ((0, 100),) and p.refused == "unknown type 7"
    p = fetch_position.plan_append(bs[1:], 5, 0, 1 << 20, lambda b: "bad")
    assert p.chunks == () and p.refused == "bad"


def test_log_start_is_followed_up_to_our_hw() -> None:
    assert fetch_position.follow_log_start(0, 10, 5) == 5
    assert fetch_position.follow_log_start(0, 10, 11) is None  # not past what we have
    assert fetch_position.follow_log_start(6, 10, 5) is None


def test_lme_truncation() -> None:
    epochs = [(1, 0), (3, 100), (5, 250)]
    assert truncation.lme_cut(epochs, 0, 3) == 250
    assert truncation.lme_cut(epochs, 0, 5) == -1
    assert truncation.lme_truncation(epochs, 0, 300, 5) is None
    cut = truncation.lme_truncation(epochs, 0, 300, None)
    assert cut is not None and cut[0] == 0 and "from scratch" in cut[1]
    assert truncation.lme_truncation(epochs, 300, 300, None) is None  # empty log


def test_failover_cut_and_bump() -> None:
    assert truncation.lso_cut(10, 7) == 7 and truncation.lso_cut(10, 10) is None
    assert truncation.bump_target(7, 2) == 8 and truncation.bump_target(None, 2) == 3
    assert truncation.needs_bump(7, 7) and not truncation.needs_bump(7, 8)


def test_realignment() -> None:
    assert truncation.divergence_target(20, 4, 12, (4, 15)) == 12
    assert truncation.divergence_target(20, 4, 18, (4, 15)) == 15
    assert truncation.divergence_target(20, 4, 18, (-1, -1)) == 18
    assert truncation.divergence_target(20, -1, -1, (-1, -1), fallback=9) == 9
    assert truncation.divergence_target(20, -1, -1, (-1, -1)) is None
    assert truncation.out_of_range(3, 2, 5, 30).restart_at == 5
    assert truncation.out_of_range(5, 2, 5, 30).restart_at == 5
    assert truncation.out_of_range(40, 2, 5, 30).diverged_epoch == 2
    assert truncation.out_of_range(10, None, 5, 30).retry
    # inside the range yet refused: the source lost our epoch; cut at its log start if unknown
    assert truncation.out_of_range(10, 2, 5, 30) == truncation.OutOfRange(
        diverged_epoch=2, fallback=5
    )


def test_plans_keep_the_kips_order() -> None:
    p = plan(S.MIRRORING, S.STOPPING, S.STOPPED)
    assert p.index(Step.LSO_TRUNCATE) < p.index(Step.START_BUMP) < p.index(Step.WRITE_STATE)
    p = plan(S.PREPARING, S.MIRRORING, S.MIRRORING)
    assert p == (
        Step.CHECK_SOURCE,
        Step.LME_TRUNCATE,
        Step.AWAIT_REPLICAS,
        Step.WRITE_STATE,
        Step.START_FETCHER,
    )
    assert Step.START_FETCHER not in plan(S.PREPARING, S.MIRRORING, S.PAUSED)
    restarted = plan(S.STOPPING, S.STOPPED, S.STOPPED)
    assert restarted[:3] == (Step.STOP_FETCHER, Step.LSO_TRUNCATE, Step.RECORD_LME)
    assert plan(S.STOPPING, S.STOPPED, S.STOPPED, bump_started=True)[0] == Step.FINISH_BUMP
    # STOPPED is written only once the marker is committed, whoever does STOPPING
    for bump_started in (False, True):
        p = plan(S.STOPPING, S.STOPPED, S.STOPPED, bump_started=bump_started)
        assert p.index(Step.APPEND_MARKER) < p.index(Step.AWAIT_MARKER) < p.index(Step.WRITE_STATE)
    # the same leader, its marker appended and not yet committed: it waits again, no new marker
    assert plan(S.STOPPING, S.STOPPED, S.STOPPED, marker_pending=True) == (
        Step.AWAIT_MARKER,
        Step.WRITE_STATE,
        Step.CLEAR_NAME,
    )


def test_truncation_wait_clock() -> None:
    o, since, _ = attempt(None, 10.0, [2], under_min_isr=False, timeout_s=5)
    assert (o, since) == (Outcome.WAITING, 10.0)
    o, since, waited = attempt(since, 15.0, [2], under_min_isr=False, timeout_s=5)
    assert (o, waited) == (Outcome.FAILED, 5.0)
    o, since, _ = attempt(10.0, 15.0, [2], under_min_isr=True, timeout_s=5)
    assert (o, since) == (Outcome.RETRY, None)  # the clock stops below min ISR
