"""KIP-853 voter changes on the leader: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter.

Kafka's rules (its Add/Remove/UpdateVoterHandler), in the order they are checked:

- one change at a time: another in progress -> REQUEST_TIMED_OUT;
- the leader must have committed an entry of its epoch (its high watermark is known), so any
  change an earlier leader left uncommitted is settled -> REQUEST_TIMED_OUT;
- ``kraft.version`` must be 1 (voters in the log; static ``controller.quorum.voters`` cannot
  change) -> UNSUPPORTED_VERSION;
- the newest Voters record must be committed -> REQUEST_TIMED_OUT;
- add: the id must not be a voter already -> DUPLICATE_VOTER; remove / update: the (id,
  directory id) must be a voter -> VOTER_NOT_FOUND (removing the last voter too).

An added voter must first be caught up: an observer whose last fetch reached the high
watermark. Kafka checks this once and refuses a lagging one; we let the request wait for it
until its timeout (then REQUEST_TIMED_OUT), which gives a freshly started controller time to
replicate. The new set is one Voters record appended by the leader; it takes effect when
appended (the high watermark counts the new majority at once) and the request is answered
when it commits. A leader that removed itself resigns once the removal is committed.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from broker.raft import messages as m
from broker.raft.leader_state import LeaderState
from broker.raft.outputs import VoterChangeDone
from broker.raft.replication import ReplicationHandlers
from broker.raft.voter_set import VoterEndpoint, VoterEntry, VoterSet


@dataclass(slots=True)
class PendingChange:
    op_id: int
    kind: str  # "add" | "remove" | "update"
    voter: VoterEntry
    deadline: int
    record_offset: int = -1  # where its Voters record went; -1: waiting to append (add)
    epoch: int = -1


VoterChangeResult = int | tuple[int, str]  # a pending op's id, or an immediate (error, message)


class VoterChangeHandlers(ReplicationHandlers):
    _pending_change: PendingChange | None
    _next_op: int

    def _init_reconfig(self) -> None:
        self._pending_change = None
        self._next_op = 1

    def _check_change(self, st: LeaderState, verb: str) -> tuple[int, str] | None:
        if self._pending_change is not None:
            return (
                m.REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to handle previous voter change request",
            )
        if st.high_watermark < 0:
            return (
                m.REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to establish HWM and fence previous "
                "voter changes",
            )
        if self.kraft_version < 1 or not self.dynamic:
            return (
                m.UNSUPPORTED_VERSION,
                f"Cluster doesn't support {verb} voter because the kraft.version feature is "
                f"{self.kraft_version}",
            )
        if self.voters_offset >= self._hw:
            return (
                m.REQUEST_TIMED_OUT,
                f"Request timed out waiting for voters to commit the latest voter change at "
                f"{self.voters_offset} with HWM {self._hw}",
            )
        return None

    def _not_leader(self) -> tuple[int, str]:
        return (m.NOT_LEADER_OR_FOLLOWER, f"Not the leader (leader {self.leader_id})")

    def add_voter_op(self, now: int, voter: VoterEntry, timeout_ms: int) -> VoterChangeResult:
        st = self.state
        if not isinstance(st, LeaderState):
            return self._not_leader()
        error = self._check_change(st, "adding")
        if error is not None:
            return error
        if voter.voter_id in self.voters:
            return (
                m.DUPLICATE_VOTER,
                f"The voter id for ReplicaKey(id={voter.voter_id}, directoryId="
                f"{voter.directory_id}) is already part of the set of voters "
                f"{self.voter_set.describe()}.",
            )
        op = PendingChange(self._next_op, "add", voter, now + timeout_ms, epoch=st.epoch)
        self._next_op += 1
        self._pending_change = op
        self._advance_change(now)
        return op.op_id

    def remove_voter_op(self, now: int, voter_id: int, directory_id: object) -> VoterChangeResult:
        st = self.state
        if not isinstance(st, LeaderState):
            return self._not_leader()
        error = self._check_change(st, "removing")
        if error is not None:
            return error
        current = self.voter_set.get(voter_id)
        if current is None or current.directory_id != directory_id or len(self.voters) == 1:
            return (
                m.VOTER_NOT_FOUND,
                f"Cannot remove voter ReplicaKey(id={voter_id}, directoryId={directory_id}) "
                f"from the set of voters {self.voter_set.describe()}",
            )
        return self._append_change(now, st, "remove", current, self.voter_set.remove(voter_id))

    def update_voter_op(
        self,
        now: int,
        voter_id: int,
        directory_id: object,
        endpoints: Sequence[VoterEndpoint],
        kraft_range: tuple[int, int],
    ) -> VoterChangeResult:
        st = self.state
        if not isinstance(st, LeaderState):
            return self._not_leader()
        error = self._check_change(st, "updating")
        if error is not None:
            return error
        current = self.voter_set.get(voter_id)
        if current is None or current.directory_id != directory_id:
            return (
                m.VOTER_NOT_FOUND,
                f"Voter ReplicaKey(id={voter_id}, directoryId={directory_id}) is not in the "
                f"set of voters {self.voter_set.describe()}",
            )
        new = VoterEntry(voter_id, current.directory_id, tuple(endpoints), *kraft_range)
        if new == current:
            return m.NONE, ""
        return self._append_change(now, st, "update", new, self.voter_set.replace(new))

    def _append_change(
        self, now: int, st: LeaderState, kind: str, voter: VoterEntry, new_set: VoterSet
    ) -> VoterChangeResult:
        op = PendingChange(self._next_op, kind, voter, now + (1 << 40), epoch=st.epoch)
        self._next_op += 1
        self._pending_change = op
        self._append_voters(now, st, op, new_set)
        return op.op_id

    def _append_voters(self, now: int, st: LeaderState, op: PendingChange, vs: VoterSet) -> None:
        offset = self.log.append_as_leader(
            [vs.encode()], st.epoch, control=True, control_type=m.KRAFT_VOTERS
        )
        op.record_offset = offset
        self._history.add(offset, vs)
        self._refresh_voters(now)
        self._leader_appended(now, st)

    def _advance_change(self, now: int) -> None:
        """Move the pending change on: append an add once its voter is caught up, answer once
        its record is committed, time out, or fail when leadership is lost."""
        op = self._pending_change
        if op is None:
            return
        st = self.state
        if not isinstance(st, LeaderState) or st.epoch != op.epoch:
            self._finish_change(op, m.NOT_LEADER_OR_FOLLOWER, "The leader changed")
            return
        if op.record_offset < 0:
            if now >= op.deadline:
                self._finish_change(
                    op,
                    m.REQUEST_TIMED_OUT,
                    f"Aborted add voter operation for ReplicaKey(id={op.voter.voter_id}, "
                    f"directoryId={op.voter.directory_id}) since it is lagging behind",
                )
                return
            since = now - self.config.fetch_timeout_ms
            if st.caught_up(op.voter.voter_id, self._hw, since):
                self._append_voters(now, st, op, self.voter_set.add(op.voter))
            return
        if self._hw > op.record_offset:
            self._finish_change(op, m.NONE, None)

    def _finish_change(self, op: PendingChange, error: int, message: str | None) -> None:
        self._pending_change = None
        self._out.append(VoterChangeDone(op.op_id, error, message))

    def _change_deadline(self) -> int | None:
        op = self._pending_change
        return op.deadline if op is not None and op.record_offset < 0 else None
