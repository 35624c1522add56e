"""What a partition leader knows about one follower (Kafka's ``Replica`` / ``ReplicaState``).

Updated only by the follower's valid Fetch requests (not by ones that diverge or fail):

- ``log_end_offset``: the fetch offset (-1 until the first fetch under this leader);
- ``last_caught_up_ms``: the latest time T at which the follower had everything the leader had
  at T. A fetch at offset >= the leader's end offset now means caught up now; a fetch at offset
  >= the leader's end offset at the *previous* fetch means it was caught up at the previous
  fetch. So a follower that always trails a busy leader by a few records, yet keeps reading
  what was there one fetch ago, stays caught up;
- ``broker_epoch``: the broker epoch the fetch carried (None before any fetch), which the ISR
  rules compare with the metadata's.

Caught up (ISR membership, ``isCaughtUp``): the follower's end offset equals the leader's, or
it was caught up within ``replica.lag.time.max.ms``.

Times are the leader's clock. ``NEVER`` stands for Kafka's 0 ("long ago") without assuming
the clock starts near the epoch, so a fake clock starting at 0 behaves like a wall clock.
"""

NEVER = -(1 << 62)


class ReplicaProgress:
    __slots__ = (
        "broker_epoch",
        "last_caught_up_ms",
        "last_fetch_leader_end",
        "last_fetch_ms",
        "log_end_offset",
        "log_start_offset",
    )

    def __init__(self) -> None:
        self.log_start_offset = -1
        self.log_end_offset = -1
        self.last_fetch_leader_end = 0
        self.last_fetch_ms = NEVER
        self.last_caught_up_ms = NEVER
        self.broker_epoch: int | None = None

    def __repr__(self) -> str:
        return (
            f"ReplicaProgress(leo={self.log_end_offset}, caught_up={self.last_caught_up_ms}, "
            f"fetch={self.last_fetch_ms}, broker_epoch={self.broker_epoch})"
        )

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (
            leader_end_offset == self.log_end_offset
            or now_ms - self.last_caught_up_ms <= max_lag_ms
        )

    def on_fetch(
        self,
        fetch_offset: int,
        log_start_offset: int,
        now_ms: int,
        leader_end_offset: int,
        broker_epoch: int,
    ) -> None:
        """A valid Fetch at ``fetch_offset`` while the leader's log ended at ``leader_end_offset``."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end = max(leader_end_offset, self.last_fetch_leader_end)
        self.last_fetch_ms = now_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_end_offset: int, *, new_leader: bool, in_isr: bool) -> None:
        """A new leader epoch (``Replica.resetReplicaState``). An ISR member counts as caught up
        now, others as never (so they do not hold the HW back before they fetch). A new leader
        forgets everything else; a re-elected one keeps the end offset and broker epoch."""
        self.last_caught_up_ms = now_ms if in_isr else NEVER
        if new_leader:
            self.log_start_offset = -1
            self.log_end_offset = -1
            self.last_fetch_leader_end = -1
            self.last_fetch_ms = NEVER
            self.broker_epoch = None
        else:
            self.last_fetch_leader_end = leader_end_offset
            self.last_fetch_ms = now_ms if in_isr else NEVER
