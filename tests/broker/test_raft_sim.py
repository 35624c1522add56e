"""The seeded KRaft simulation (``tests/broker/raft_sim.py``) run as tests.

- ``test_seeds``: RAFT_SIM_SEEDS seeds (default 2000) from RAFT_SIM_START (default 0);
  ``test_dynamic_seeds``: RAFT_SIM_DYNAMIC_SEEDS KIP-853 seeds (default 600). A failure names
  each failing seed and how to replay it (the seed loop is ``tests/broker/sim_harness.py``).
- ``test_replay``: one seed, traced:
  ``RAFT_SEED=1234 python -m pytest tests/broker/test_raft_sim.py -k replay -s`` (seed 0 when
  unset, so the path stays tested; RAFT_DYNAMIC=1 for a KIP-853 seed).
- ``test_planted_*``: the checker must catch known bugs planted in the core, within a bounded
  number of seeds, so a weakened checker fails here instead of passing everything. The bounds
  are several times the seed that catches each bug today (they stop at the first catch, or
  the first one by the check the bug is planted for).

Long runs: ``python -m tests.broker.raft_sim --seeds 100000 --max-seconds 3600``.
"""

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from broker.raft import base, core, election, leader_state, reconfig, replication, states
from broker.raft import messages as m
from broker.raft.core import RaftConfig
from broker.raft.replicated_log import MemoryLog
from tests.broker.raft_sim import Params, Simulation, SimulationFailure, run_seed
from tests.broker.sim_harness import first_failure, run_seeds, seeds_from_env


def test_seeds() -> None:
    report = run_seeds(run_seed, seeds_from_env("RAFT_SIM_SEEDS", "RAFT_SIM_START"))
    if report.failures:
        pytest.fail(report.summary("raft simulation"))


def test_replay() -> None:
    """RAFT_SEED=N replays seed N with a trace (seed 0 when unset, so the path stays tested);
    RAFT_DYNAMIC=1 replays a KIP-853 seed."""
    seed = int(os.environ.get("RAFT_SEED", "0"))
    dynamic = os.environ.get("RAFT_DYNAMIC", "") not in ("", "0")
    print(run_seed(seed, trace=True, dynamic=dynamic))


# --- the checker catches planted bugs ---------------------------------------------------------


def first_failing_seed(
    max_seeds: int, profile: Callable[[int], Simulation] | None = None
) -> SimulationFailure | None:
    if profile is None:
        return first_failure(run_seed, max_seeds)
    return first_failure(lambda seed: profile(seed).run(), max_seeds)


def first_seed_caught_by(check: str, max_seeds: int) -> SimulationFailure | None:
    """The first seed whose failure names ``check`` (a bug may trip others first on some)."""
    for seed in range(max_seeds):
        try:
            run_seed(seed)
        except SimulationFailure as e:
            if check in e.message:
                return e
    return None


def figure8_profile(seed: int) -> Simulation:
    """Three voters, one entry per fetch, many targeted crashes: where a new leader's old-epoch
    entries can sit on a majority while its own LeaderChange entry does not."""
    p = Params.from_seed(seed, 8000)
    p = dataclasses.replace(p, voters=3, targeted=0.4, max_latency=min(p.max_latency, 50))
    config = RaftConfig(fetch_max_entries=1, max_bytes_between_snapshots=p.snapshot_bytes)
    return Simulation(seed, params=p, config=config)


def test_figure8_profile_passes() -> None:
    for seed in range(300):
        figure8_profile(seed).run()


@contextmanager
def planted(patch: Callable[[pytest.MonkeyPatch], None]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        patch(mp)
        yield


def test_planted_vote_without_log_check() -> None:
    """Granting votes to candidates whose log is behind loses committed entries."""
    orig = states.unattached_can_grant

    def patch(mp: pytest.MonkeyPatch) -> None:
        mp.setattr(
            states,
            "unattached_can_grant",
            lambda voted, leader, cand, up, pre: orig(voted, leader, cand, True, pre),
        )

    with planted(patch):
        caught = first_failing_seed(200)
    assert caught is not None


def test_planted_follower_skips_flush() -> None:
    """Followers reporting unflushed offsets: committed entries are not durable on a majority."""

    def without_flush(fn: Callable[..., object]) -> Callable[..., object]:
        def wrapper(self: core.RaftCore, *args: object) -> object:
            self.log.skip_flush = True  # type: ignore[attr-defined]
            try:
                return fn(self, *args)
            finally:
                self.log.skip_flush = False  # type: ignore[attr-defined]

        return wrapper

    def patch(mp: pytest.MonkeyPatch) -> None:
        flush = MemoryLog.flush
        mp.setattr(
            MemoryLog,
            "flush",
            lambda log: None if getattr(log, "skip_flush", False) else flush(log),
        )
        for name in ("_send_fetch", "_on_fetch_response"):
            mp.setattr(
                replication.ReplicationHandlers,
                name,
                without_flush(getattr(replication.ReplicationHandlers, name)),
            )

    with planted(patch):
        caught = first_failing_seed(50)
    assert caught is not None
    assert "durable on only" in str(caught)


def test_planted_follower_high_watermark_past_its_log() -> None:
    """A follower taking the leader's high watermark without min(own end offset)."""
    orig = replication.ReplicationHandlers._on_fetch_response

    def on_fetch_response(
        self: core.RaftCore, now: int, sender: int, resp: m.FetchResponse
    ) -> bool:
        ok = orig(self, now, sender, resp)
        plain = resp.diverging_epoch is None and resp.snapshot_id is None
        if ok and resp.error_code == m.NONE and plain and isinstance(self.state, states.Follower):
            self._set_hw(resp.high_watermark)
        return ok

    with planted(
        lambda mp: mp.setattr(
            replication.ReplicationHandlers, "_on_fetch_response", on_fetch_response
        )
    ):
        caught = first_failing_seed(50)
    assert caught is not None


def test_planted_fetch_without_epoch_validation() -> None:
    """A leader serving entries without checking the follower's last fetched epoch."""
    orig = replication.ReplicationHandlers._try_complete_fetch

    def try_complete(
        self: core.RaftCore, now: int, sender: int, req: m.FetchRequest, arrived: bool = True
    ) -> m.FetchResponse:
        st, log = self.state, self.log
        if (
            not isinstance(st, leader_state.LeaderState)
            or req.current_leader_epoch != st.epoch
            or not log.start_offset <= req.fetch_offset <= log.end_offset
        ):
            return orig(self, now, sender, req, arrived)
        entries = log.read(req.fetch_offset, min(req.max_entries, self.config.fetch_max_entries))
        if st.update_replica(sender, req.fetch_offset, now if arrived else None):
            self._set_hw(st.high_watermark)
        leader = m.LeaderIdAndEpoch(self.node_id, st.epoch)
        return m.FetchResponse(m.NONE, leader, st.high_watermark, log.start_offset, tuple(entries))

    with planted(
        lambda mp: mp.setattr(replication.ReplicationHandlers, "_try_complete_fetch", try_complete)
    ):
        caught = first_failing_seed(100)
    assert caught is not None


def test_planted_no_check_quorum() -> None:
    """A leader cut off from its majority that never resigns."""

    def patch(mp: pytest.MonkeyPatch) -> None:
        mp.setattr(leader_state.LeaderState, "check_quorum_expired", lambda self, now: False)
        mp.setattr(
            leader_state.LeaderState, "check_quorum_deadline", property(lambda self: 1 << 62)
        )

    with planted(patch):
        caught = first_failing_seed(1000)
    assert caught is not None
    assert "after losing its majority" in str(caught)


def test_planted_vote_comparing_last_epochs_only() -> None:
    """A voter that finds a candidate up to date when their last epochs match, whatever the end
    offsets: a candidate missing the tail of that epoch, committed, is elected. Leader
    Completeness sees it at the election."""
    orig = election.ElectionHandlers._on_vote_request

    def on_vote_request(self: core.RaftCore, now: int, req: m.VoteRequest) -> m.VoteResponse:
        log = self.log
        if req.last_offset_epoch == log.last_fetched_epoch:
            req = dataclasses.replace(req, last_offset=max(req.last_offset, log.end_offset))
        return orig(self, now, req)

    with planted(
        lambda mp: mp.setattr(election.ElectionHandlers, "_on_vote_request", on_vote_request)
    ):
        caught = first_failing_seed(30)  # seed 3 today
    assert caught is not None
    assert "Leader Completeness" in caught.message


def test_planted_fetch_validation_off_by_one() -> None:
    """A leader validating a fetch against the end of the follower's last epoch one entry too
    far: a follower keeps the last entry of an epoch the leader's log ended one entry earlier,
    and appends the leader's next entries after it, so two logs hold the same (offset, epoch)
    after different entries. Log Matching sees it when it happens, uncommitted (on some seeds
    the miscounted follower moves the high watermark first, and durability fails instead)."""

    def leader_side(fn: Callable[..., m.FetchResponse]) -> Callable[..., m.FetchResponse]:
        def wrapper(self: core.RaftCore, *args: object, **kwargs: object) -> m.FetchResponse:
            self.log.leader_side = True  # type: ignore[attr-defined]
            try:
                return fn(self, *args, **kwargs)
            finally:
                self.log.leader_side = False  # type: ignore[attr-defined]

        return wrapper

    def patch(mp: pytest.MonkeyPatch) -> None:
        end_for_epoch = MemoryLog.end_offset_for_epoch

        def off_by_one(log: MemoryLog, epoch: int) -> m.OffsetAndEpoch:
            found = end_for_epoch(log, epoch)
            if getattr(log, "leader_side", False) and found.offset < log.end_offset:
                return m.OffsetAndEpoch(found.offset + 1, found.epoch)
            return found

        mp.setattr(MemoryLog, "end_offset_for_epoch", off_by_one)
        mp.setattr(
            replication.ReplicationHandlers,
            "_try_complete_fetch",
            leader_side(replication.ReplicationHandlers._try_complete_fetch),
        )

    with planted(patch):
        caught = first_seed_caught_by("Log Matching", 100)  # seed 12 today
    assert caught is not None


def test_planted_vote_not_persisted() -> None:
    """A vote kept only in memory: after a crash the voter votes again in the same epoch."""
    orig = base.CoreBase._switch

    def switch(self: core.RaftCore, now: int, new: states.EpochState, durable: bool) -> None:
        if isinstance(new, states.Unattached) and new.voted_id >= 0:
            durable = False
        orig(self, now, new, durable)

    with planted(lambda mp: mp.setattr(base.CoreBase, "_switch", switch)):
        # rare (a voter must crash between two candidates' requests): about one seed in 800
        caught = first_failing_seed(6000)
    assert caught is not None
    assert "two leaders" in str(caught)


def test_planted_high_watermark_without_the_epoch_start_rule() -> None:
    """Raft's Figure 8: counting old-epoch entries as committed before the new leader's own
    entry is on a majority. A later leader with a higher-epoch entry overwrites them."""

    def update(self: leader_state.LeaderState) -> bool:
        offsets = sorted(self.end_offsets.values(), reverse=True)
        candidate = offsets[len(offsets) // 2]
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    with planted(
        lambda mp: mp.setattr(leader_state.LeaderState, "_maybe_update_high_watermark", update)
    ):
        caught = first_failing_seed(3000, figure8_profile)  # about one seed in 300
    assert caught is not None


# --- KIP-853: voter changes ------------------------------------------------------------------


def test_dynamic_seeds() -> None:
    """Voters in the log, added and removed at random moments among partitions and crashes."""
    seeds = seeds_from_env("RAFT_SIM_DYNAMIC_SEEDS", "RAFT_SIM_START", default=600)
    report = run_seeds(lambda seed: run_seed(seed, dynamic=True), seeds)
    if report.failures:
        pytest.fail(report.summary("raft simulation, dynamic quorum"))
    assert report.totals["voter_changes"] > len(seeds)  # the runs did change the voters


def first_failing_dynamic_seed(max_seeds: int) -> SimulationFailure | None:
    return first_failure(lambda seed: run_seed(seed, dynamic=True), max_seeds)


def test_planted_two_voter_changes_at_once() -> None:
    """A leader that starts a change before the previous one committed."""
    with planted(
        lambda mp: mp.setattr(reconfig.VoterChangeHandlers, "_check_change", lambda *a: None)
    ):
        caught = first_failing_dynamic_seed(300)
    assert caught is not None


def test_planted_removed_leader_never_campaigns() -> None:
    """Without KIP-853's rule that a node removed by an uncommitted record still campaigns
    among the previous voters, a leader that removed itself from two voters and lost office
    before the removal committed leaves the quorum without a leader for good."""
    with planted(
        lambda mp: mp.setattr(
            base.CoreBase,
            "electorate",
            property(lambda self: self.voters if self.is_voter else frozenset()),
        )
    ):
        caught = first_failing_dynamic_seed(400)
    assert caught is not None


def test_planted_confirmation_without_a_new_entry() -> None:
    """A leader that takes fetches as proof after a pause (not an entry appended since, then
    committed) confirms a leadership others took while it did not run."""
    orig = leader_state.LeaderState.confirmed

    def patch(mp: pytest.MonkeyPatch) -> None:
        def confirmed(self: leader_state.LeaderState, now_ms: int, window_ms: int) -> bool:
            stall, self.stall_offset = self.stall_offset, -1
            try:
                return orig(self, now_ms, window_ms)
            finally:
                self.stall_offset = stall

        mp.setattr(leader_state.LeaderState, "confirmed", confirmed)

    with planted(patch):
        caught = first_failing_seed(400)
    assert caught is not None
    assert "confirms its leadership of epoch" in str(caught)
