"""Which replica a consumer should read a partition from (KIP-392, ``replica.selector.class``).

Only the leader chooses, for a consumer Fetch of v11+ (the version that carries ``rack_id``
and answers ``preferred_read_replica``). The candidates are the leader and those followers
in the ISR whose log covers the fetch offset (log start <= offset <= log end, as the leader
last heard from their fetches) and whose broker is registered, unfenced, with an endpoint on
the listener the consumer came in on. Kafka's ``RackAwareReplicaSelector``: a consumer
without a rack, or whose rack holds no candidate, or whose rack holds the leader, reads from
the leader; otherwise from the most caught-up candidate of its rack (largest log end, then
the least time since it was last caught up, then the largest broker id).

Without ``replica.selector.class`` the leader never names another replica. Followers serve
v11+ consumer fetches either way (up to their own high watermark), as Kafka's do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple


class ReplicaView(NamedTuple):
    """One candidate as the leader sees it."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    since_caught_up_ms: int  # 0 for the leader


def rack_aware_select(
    client_rack: str, leader: ReplicaView, candidates: Iterable[ReplicaView]
) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector over ``candidates`` (which include the leader)."""
    if not client_rack:
        return leader
    same_rack = [c for c in candidates if c.rack == client_rack]
    if not same_rack or any(c.broker_id == leader.broker_id for c in same_rack):
        return leader
    return max(same_rack, key=lambda c: (c.log_end_offset, -c.since_caught_up_ms, c.broker_id))


class FollowerView(NamedTuple):
    """What the leader knows of one follower: its id and (log start, log end, last caught up
    ms) from its latest valid fetch."""

    broker_id: int
    log_start_offset: int
    log_end_offset: int
    last_caught_up_ms: int


def preferred_read_replica(
    selector: str | None,
    client_rack: str,
    leader_id: int,
    leader_log_end: int,
    isr: frozenset[int],
    followers: Iterable[FollowerView],
    fetch_offset: int,
    now_ms: int,
    rack_of: Callable[[int], tuple[bool, str | None]],
) -> int:
    """The replica the leader names in ``preferred_read_replica``, or -1 (read here).

    ``rack_of(broker_id)`` gives (reachable, rack): reachable when the broker is registered,
    unfenced and has an endpoint on the consumer's listener."""
    if selector is None or not client_rack:
        return -1  # the rack-aware rule for a consumer without a rack: the leader
    leader_ok, leader_rack = rack_of(leader_id)
    if leader_ok and leader_rack == client_rack:
        return -1  # the leader is in the consumer's rack (the common case, decided cheaply)
    leader = ReplicaView(leader_id, leader_rack if leader_ok else None, leader_log_end, 0)
    candidates = [leader]
    for f in followers:
        if f.broker_id not in isr or not f.log_start_offset <= fetch_offset <= f.log_end_offset:
            continue
        ok, rack = rack_of(f.broker_id)
        # an unreachable broker stays a candidate, as Kafka's Node.noNode() does, but has no
        # rack and is never named
        since = max(0, now_ms - f.last_caught_up_ms)
        candidates.append(ReplicaView(f.broker_id, rack if ok else None, f.log_end_offset, since))
    chosen = rack_aware_select(client_rack, leader, candidates)
    if chosen.broker_id == leader_id or not rack_of(chosen.broker_id)[0]:
        return -1
    return chosen.broker_id
