"""Elections: Vote (with KIP-996 pre-vote), BeginQuorumEpoch and EndQuorumEpoch handling.

A Prospective asks for pre-votes in its own epoch; a Candidate (epoch + 1, its own vote
persisted) asks for votes. Whether a vote is granted is the state's rule (``states.py``); a
granted standard vote is persisted before the response leaves.
"""

from broker.raft import messages as m
from broker.raft.base import CoreBase
from broker.raft.states import (
    Candidate,
    Prospective,
    Unattached,
)


class ElectionHandlers(CoreBase):
    def _send_votes(self, now: int, st: Prospective | Candidate, pre_vote: bool) -> None:
        if self._lost(st.rejected):
            return  # lost already: waiting for the timer
        log = self.log
        for v in sorted(self.electorate - {self.node_id}):
            if v in st.granted or v in st.rejected:
                continue
            req = m.VoteRequest(
                self.node_id,
                st.epoch,
                log.last_fetched_epoch,
                log.end_offset,
                pre_vote=pre_vote,
                voter_id=v,
                cluster_id=self.config.cluster_id,
            )
            self._send_request(now, v, req)

    def _end_epoch_backoff(self, successors: tuple[int, ...]) -> int:
        cap = self.config.election_backoff_max_ms
        if self.node_id not in successors:
            return cap
        pos = successors.index(self.node_id)
        if pos == 0:
            return 0
        base = cap >> (len(successors) - 1)
        return min(cap, base << (pos - 1))

    def _on_vote_request(self, now: int, req: m.VoteRequest) -> m.VoteResponse:
        # a candidate bumped its epoch past its log's; a prospective did not
        illegal = (
            req.last_offset_epoch > req.replica_epoch
            if req.pre_vote
            else req.last_offset_epoch >= req.replica_epoch
        )
        if req.last_offset < 0 or req.last_offset_epoch < 0 or req.replica_id < 0 or illegal:
            return m.VoteResponse(m.INVALID_REQUEST, self.leader_id, self.epoch, False)
        if req.replica_epoch < self.epoch:
            return m.VoteResponse(m.FENCED_LEADER_EPOCH, self.leader_id, self.epoch, False)
        # KIP-853: a candidate may be in a voter set this node has not read yet
        if not self.dynamic and req.replica_id not in self.voters:
            return m.VoteResponse(m.INCONSISTENT_VOTER_SET, self.leader_id, self.epoch, False)
        if req.replica_epoch > self.epoch:
            self._to_unattached(now, req.replica_epoch)
        # observers never vote; but (KIP-853) a replica the candidate asks as a voter answers on
        # the merits even before it has read the Voters record that made it one, or a voter
        # added just before the leader failed could leave the quorum without a majority
        if not self.is_voter and not (self.dynamic and req.voter_id == self.node_id):
            return m.VoteResponse(m.NONE, self.leader_id, self.epoch, False)
        log = self.log
        up_to_date = (req.last_offset_epoch, req.last_offset) >= (
            log.last_fetched_epoch,
            log.end_offset,
        )
        st = self.state
        granted = st.can_grant_vote(req.replica_id, up_to_date, req.pre_vote)
        if granted and not req.pre_vote:
            deadline = now + self._election_timeout()
            if isinstance(st, Unattached) and st.voted_id < 0:
                self._switch(now, Unattached(st.epoch, req.replica_id, deadline), durable=True)
            elif isinstance(st, Prospective) and st.voted_id < 0:
                new = Prospective(
                    st.epoch,
                    st.leader_id,
                    req.replica_id,
                    deadline,
                    st.retries,
                    granted={self.node_id},
                )
                self._switch(now, new, durable=True)
        return m.VoteResponse(m.NONE, self.leader_id, self.epoch, granted)

    def _on_leader_announcement(self, now: int, leader_id: int, epoch: int) -> int:
        """BeginQuorumEpoch / EndQuorumEpoch: validate and follow; returns the error code."""
        if epoch < self.epoch:
            return m.FENCED_LEADER_EPOCH
        if leader_id < 0:
            return m.INVALID_REQUEST
        if not self.dynamic and leader_id not in self.voters:
            return m.INCONSISTENT_VOTER_SET
        self._maybe_transition(now, leader_id, epoch)
        return m.NONE

    def _on_vote_response(self, now: int, sender: int, resp: m.VoteResponse) -> bool:
        handled = self._common(now, resp.error_code, resp.leader_id, resp.leader_epoch)
        if handled is not None:
            return handled
        if resp.error_code != m.NONE:
            return False
        st = self.state
        if isinstance(st, (Prospective, Candidate)) and resp.leader_epoch == st.epoch:
            if resp.vote_granted:
                st.granted.add(sender)
            else:
                st.rejected.add(sender)
                lost = self._lost(st.rejected)
                if lost and isinstance(st, Prospective):
                    self._election_lost(now, st)
                elif lost and isinstance(st, Candidate) and st.backoff_until < 0:
                    st.backoff_until = now + self._election_backoff(st.retries)
        return True
