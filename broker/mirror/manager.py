"""Drives each local mirror partition through the KIP-1279 state machine.

The wanted state comes from the topic's ``mirror.name`` config (``<m>``: mirroring, ``<m>.paused``:
paused, ``<m>.removed``: failover); the current state from the mirror coordinator. A reconcile task
per partition steps the partition one valid transition at a time, doing each state's work:

- PREPARING: align the log with the source (truncate where the epoch histories diverge), then
  MIRRORING, which starts the fetcher (which resumes from the local log end offset).
- PAUSING: stop the fetcher, then PAUSED. Resume goes straight back to MIRRORING.
- STOPPING (failover): stop the fetcher, truncate to the last stable offset and persist STOPPING
  with the last mirrored epoch in one write, while the leader epoch is bumped above every
  mirrored epoch (the KIP bumps first; nothing is appended locally until STOPPED, so the log's
  latest epoch is still the mirrored one either way); then write the MIRROR_PID_RESET control
  batch, wait until it is committed, and write STOPPED, from which the partition is writable.
  Once every partition of the topic is STOPPED its ``mirror.name`` is cleared.
- FAILED stays FAILED until the operator removes the topic from the mirror. Besides errors
  (a corrupt batch, a refused source), PREPARING fails a partition whose replicas do not complete
  the LME truncation within ``mirror.truncation.timeout.ms`` (`truncation_wait` has the rule).

Only the node leading a destination partition drives it (and runs its fetcher); the other
replicas follow that leader like any partition's followers. A node that stops leading stops
its fetcher and forgets the partition's state without writing it; the new leader reads the
state from the coordinator and resumes from its own log end (after PREPARING's alignment when
the state says so).

Everything is injected (coordinator, fetchers, controller operations, source queries) so the
manager is tested without sockets, and so the seams for a multi-node cluster stay where the KIP
puts them.

The manager is in parts, one object each, given what it needs: `manager_interfaces` (what it
needs of the node), `core` (the decisions, without I/O: the transition table, each
transition's steps, the cuts), `partition_book` (the partitions' states and locks),
`fetcher_control` (starting and stopping a partition's fetcher behind the source check),
`failover` (STOPPING and STOPPED), `partition_steps` (stepping a partition through its
transitions) and `reconcile_scheduling` (when partitions are looked at). `MirrorManager`, here,
builds them and is what the rest of the node calls.
"""

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, MirrorState
from .core import truncation_wait
from .core.states import PartitionInfo, Wanted, next_state, wanted_from_config
from .failover import EPOCH_APPLY_WAIT_S, EPOCH_RECHECK_S, Failover
from .fetcher_control import FetcherControl
from .manager_interfaces import Fetchers, Key, Replicas, SourceRefused, StateStore
from .partition_book import PartitionBook
from .partition_parts import PartitionParts
from .partition_steps import TRUNCATION_WAIT_S, UNCLEAN_CONFIG, PartitionStepper
from .reconcile_scheduling import FULL_SWEEP_S, ReconcileScheduling

__all__ = [
    "EPOCH_APPLY_WAIT_S",
    "EPOCH_RECHECK_S",
    "FULL_SWEEP_S",
    "TRUNCATION_WAIT_S",
    "UNCLEAN_CONFIG",
    "Failover",
    "FetcherControl",
    "Fetchers",
    "Key",
    "MirrorManager",
    "PartitionInfo",
    "ReconcileScheduling",
    "SourceRefused",
    "StateStore",
    "Wanted",
    "next_state",
    "wanted_from_config",
]


class MirrorManager:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        replicas: Replicas,
        states: StateStore,
        fetchers: Fetchers,
        *,
        bump_leader_epoch: Callable[[str, int, int], Awaitable[None]],
        clear_mirror_name: Callable[[str], Awaitable[None]],
        source_cluster_id: Callable[[str], Awaitable[str | None]],
        align_with_source: Callable[[str, str, int, Any], Awaitable[str | None]] | None = None,
        verify_source: Callable[[str], Awaitable[tuple[bool, str | None]]] | None = None,
        now_ms: Callable[[], int],
        monotonic: Callable[[], float] = time.monotonic,
        truncation_timeout_ms: int = truncation_wait.DEFAULT_TIMEOUT_MS,
        truncation_attempt_s: float = TRUNCATION_WAIT_S,
    ) -> None:
        self._image = image
        self._book = PartitionBook(states)
        fetcher = FetcherControl(image, fetchers, self._book, verify_source)
        self._failover = Failover(
            image,
            states,
            self._book.info,
            bump_leader_epoch=bump_leader_epoch,
            clear_mirror_name=clear_mirror_name,
            source_cluster_id=source_cluster_id,
            now_ms=now_ms,
            monotonic=monotonic,
        )
        parts = PartitionParts(image, replicas, states, self._book, fetcher, self._failover)
        self._stepper = PartitionStepper(
            parts,
            align_with_source=align_with_source,
            monotonic=monotonic,
            truncation_timeout_ms=truncation_timeout_ms,
            truncation_attempt_s=truncation_attempt_s,
        )
        self._scheduling = ReconcileScheduling(parts, self._stepper, monotonic)
        # reacting, as the node calls it: `ReconcileScheduling` starts the tasks (reconcile_all
        # is the periodic retry, every second)
        self.on_metadata = self._scheduling.on_metadata
        self.reconcile_all = self._scheduling.reconcile_all
        self.reconcile_topic = self._scheduling.reconcile_topic
        self.on_fetch_failed = self._scheduling.on_fetch_failed
        # per mirror: partitions failed because replicas did not truncate in time (a metric)
        self.truncation_timeouts = self._stepper.truncation_timeouts

    # -- queries ---------------------------------------------------------------------------

    def writable(self, topic: str, partition: int) -> bool:
        """Produce/DeleteRecords are allowed: not mirrored, or failed over (STOPPED)."""
        img = self._image()
        if not img.config(TOPIC_RESOURCE, topic).get(MIRROR_NAME_CONFIG):
            return True
        info = self._book.info.get((topic, partition))
        return info is not None and info.state == MirrorState.STOPPED

    def reason(self, topic: str, partition: int) -> str | None:
        """For --describe: why the partition FAILED, or the last truncation it went through."""
        info = self._book.info.get((topic, partition))
        return None if info is None else info.error or info.note

    def partitions(self, mirror: str | None = None) -> dict[Key, PartitionInfo]:
        return {k: v for k, v in self._book.info.items() if mirror is None or v.mirror == mirror}

    @property
    def running(self) -> int:
        """Reconcile tasks under way."""
        return self._scheduling.running

    @property
    def touched(self) -> frozenset[Key]:
        """The partitions the next per-second retry looks at (see `reconcile_all`)."""
        return self._scheduling.touched

    async def drain(self) -> None:
        """Until the tasks under way now are done (their exceptions are raised here)."""
        await self._scheduling.drain()

    async def close(self) -> None:
        self._stepper.close()
        self._failover.close()
        await self._scheduling.close()
