"""KIP-1279 PREPARING, phase two, bounded: when the leader stops waiting for the other replicas
to complete the LME truncation, and whether it retries or fails the partition.

The KIP: "If less than min ISR are available, we will skip and retry in the following fetch",
and, of replicas that "cannot catch up with the leader during LME log truncation due to slow
network, disk issues, or other failures, the mirror partition moves to the FAILED state". The
rule here (sans-IO, decided from what the leader knows at one moment):

- No replica behind: TRUNCATED, the partition may enter MIRRORING.
- The ISR below ``min.insync.replicas``: RETRY, without a clock. Too few replicas are in sync
  to tell a broken replica from a degraded cluster, so this never fails the partition; the
  clock starts again once the ISR is back to ``min.insync.replicas``.
- Otherwise the clock runs from the first attempt with enough ISR. Replicas still behind
  within ``mirror.truncation.timeout.ms``: WAITING (retried on the next round). Still behind
  after it: FAILED, naming them. Those are ISR members the leader keeps in sync that never
  fetched its cut log (alive but not truncating), or, with
  ``mirror.support.unclean.leader.election=true``, any replica out of the ISR.

The default bound (60 s) is above ``replica.lag.time.max.ms`` (30 s): in the default mode a
follower that died leaves the ISR, and so the wait, before the bound, and the partition goes on
with the replicas left; only one that stays in the ISR without truncating fails it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

TIMEOUT_KEY: Final = "mirror.truncation.timeout.ms"
DEFAULT_TIMEOUT_MS: Final = 60_000


class Outcome(enum.Enum):
    TRUNCATED = "truncated"  # every replica asked for has truncated: MIRRORING
    RETRY = "retry"  # below min.insync.replicas: try again, the clock stopped
    WAITING = "waiting"  # some behind, within the bound: try again
    FAILED = "failed"  # some still behind after the bound: FAILED


def judge(
    behind: Sequence[int],
    *,
    under_min_isr: bool,
    waited_s: float,
    timeout_s: float,
) -> Outcome:
    """What to do after one attempt: ``behind`` the replicas not yet truncated, ``waited_s``
    how long the clock has run (since the first attempt with ``min.insync.replicas``)."""
    if under_min_isr:
        return Outcome.RETRY
    if not behind:
        return Outcome.TRUNCATED
    return Outcome.FAILED if waited_s >= timeout_s else Outcome.WAITING


def who(all_replicas: bool) -> str:
    return "replicas" if all_replicas else "ISR members"


def waiting_note(behind: Sequence[int], all_replicas: bool, waited_s: float) -> str:
    return (
        f"waiting for {who(all_replicas)} {list(behind)} to complete the LME truncation "
        f"(for {waited_s:.0f}s)"
    )


def failure_reason(behind: Sequence[int], all_replicas: bool, timeout_ms: int) -> str:
    """--describe's reason for a partition failed by the bound: whom, and how to recover."""
    return (
        f"{who(all_replicas)} {list(behind)} did not complete the LME truncation within "
        f"{TIMEOUT_KEY}={timeout_ms}: fix or reassign those replicas, then remove the topic "
        "from the mirror and add it again"
    )


def attempt(
    since: float | None,
    now: float,
    behind: Sequence[int],
    *,
    under_min_isr: bool,
    timeout_s: float,
) -> tuple[Outcome, float | None, float]:
    """One look at the replicas at ``now`` (any clock, the caller's): the outcome, when the
    clock started counting (to keep for the next look; None: stopped, below min ISR) and how
    long it has run."""
    if since is None:
        since = now
    waited = now - since
    outcome = judge(behind, under_min_isr=under_min_isr, waited_s=waited, timeout_s=timeout_s)
    return outcome, (None if outcome == Outcome.RETRY else since), waited
