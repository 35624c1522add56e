"""Driving a decided transaction (Prepare* durable) to its end: a COMMIT/ABORT marker on every
partition it touched, then Complete* in ``__transaction_state``.

The coordinator alone drives it, never the producer's next request: a completion starts when
EndTxn (or a fence, or the timeout) decides, when a shard is loaded (after a restart or a
leader change), and again from the shard's periodic sweep for any decided transaction that no
completion is driving. A marker answered with an error is retried with a capped exponential
backoff until it is written, or the partition is gone (UNKNOWN_TOPIC_OR_PARTITION) or is a
read-only mirror partition; each retry is counted (`CompletionStats.marker_retries`) and
logged at WARN, naming the transactional id and the partitions, at most once a minute per
transaction. Only a lost shard stops it: the shard unloaded, or reloaded at another coordinator
epoch, whose owner completes the transaction from its own load. That is logged too.

Answers that say a partition is past this transaction: INVALID_PRODUCER_EPOCH (a newer epoch of
the producer wrote there, which the coordinator allows only once this transaction ended) ends
the transaction on that partition; TRANSACTION_COORDINATOR_FENCED (a newer coordinator wrote a
marker there) is retried while this node still owns the shard at this epoch, and stops the
completion once it does not. A marker the log can never take (a malformed batch) is logged at
ERROR and skipped rather than blocking the transaction forever.

The writes (a marker, Complete*) are shielded from cancellation: a completion replaced by a
newer one (a reload's) is cancelled, and a coordinator write cut in half would leave its
transactional id with a pending transition.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import CoordinatorError, CoordinatorRuntime, EndMarker
from broker.coordinator.txn.config import TxnConfig
from broker.coordinator.txn.markers import MarkerResult, MarkerWriter
from broker.coordinator.txn.metadata import TopicPartition
from broker.coordinator.txn.shard import Completion, TransactionShard
from protocol.errors import MirrorErrorCode

log = logging.getLogger(__name__)

WARN_INTERVAL_MS = 60_000  # at most one WARN a minute per transaction that keeps failing

# A partition gone, or a read-only mirror partition: nothing of the transaction is there.
_MARKER_SKIP = frozenset({ErrorCode.unknown_topic_or_partition, MirrorErrorCode.READ_ONLY_TOPIC})
_MARKER_FATAL = frozenset(
    {
        ErrorCode.corrupt_message,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_required_acks,
        ErrorCode.unsupported_for_message_format,
    }
)


@dataclass(slots=True)
class CompletionStats:
    """Counted since start (the metrics endpoint reads them)."""

    marker_retries: int = 0  # marker writes answered with an error and tried again
    restarted: int = 0  # completions the periodic sweep found missing and started
    stopped: int = 0  # completions stopped because the shard moved (the next owner completes)


def _name(code: MarkerResult) -> str:
    return code.name.upper()  # Kafka's spelling


class Completions:
    """One running completion per transactional id."""

    def __init__(
        self,
        config: TxnConfig,
        markers: MarkerWriter,
        runtime: CoordinatorRuntime[TransactionShard],
        owner: Callable[[int, int], bool],
        sleep: Callable[[int], Awaitable[None]],
    ) -> None:
        self._config = config
        self._markers = markers
        self._runtime = runtime
        self._owner = owner  # (shard, coordinator epoch) -> still ours?
        self._sleep = sleep
        self._running: dict[str, tuple[Completion, asyncio.Task[None]]] = {}
        self._warned_ms: dict[str, int] = {}
        self.stats = CompletionStats()

    def tasks(self) -> list["asyncio.Task[None]"]:
        return [t for _, t in self._running.values()]

    def is_running(self, c: Completion) -> bool:
        running = self._running.get(c.transactional_id)
        return running is not None and running[0] == c and not running[1].done()

    def start(self, partition: int, c: Completion) -> "asyncio.Task[None]":
        """Complete `c`; the running task when `c` is already being completed. A completion of
        the same id from an older load (another coordinator epoch) is replaced."""
        tid = c.transactional_id
        running = self._running.get(tid)
        if running is not None and not running[1].done():
            if running[0] == c:
                return running[1]
            running[1].cancel()
        task = asyncio.ensure_future(self._complete(partition, c))
        self._running[tid] = (c, task)

        def done(t: "asyncio.Task[None]") -> None:
            current = self._running.get(tid)
            if current is not None and current[1] is t:
                del self._running[tid]
                self._warned_ms.pop(tid, None)

        task.add_done_callback(done)
        return task

    async def _complete(self, partition: int, c: Completion) -> None:
        backoff = self._config.marker_retry_backoff_ms
        while self._owner(partition, c.coordinator_epoch):
            try:
                if await self._write_markers(partition, c):
                    await self._write_complete(partition, c)
                else:
                    self._stopped(partition, c)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug or an unexpected failure must not leave the transaction decided
                # forever: log it and try again.
                log.exception("completing transactional id %s failed; retrying", c.transactional_id)
            await self._sleep(backoff)
            backoff = self._next(backoff)
        self._stopped(partition, c)

    def _stopped(self, partition: int, c: Completion) -> None:
        self.stats.stopped += 1
        log.info(
            "transactional id %s: %s left to the next coordinator of %s-%d (this node no "
            "longer holds it at coordinator epoch %d)",
            c.transactional_id,
            "commit" if c.commit else "abort",
            "__transaction_state",
            partition,
            c.coordinator_epoch,
        )

    def _next(self, backoff: int) -> int:
        return min(backoff * 2, self._config.marker_retry_max_backoff_ms)

    async def _write_one(self, topic: str, p: int, marker: EndMarker) -> MarkerResult:
        try:
            return await asyncio.shield(self._markers.write_marker(topic, p, marker))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("marker for %s-%d failed", topic, p)
            return ErrorCode.unknown_server_error

    async def _write_markers(self, partition: int, c: Completion) -> bool:
        """Every marker written (or skipped); False when the shard is no longer ours."""
        marker = EndMarker(c.producer_id, c.producer_epoch, c.coordinator_epoch, c.commit)
        pending = sorted(c.partitions)
        backoff = self._config.marker_retry_backoff_ms
        while pending:
            if not self._owner(partition, c.coordinator_epoch):
                return False
            failed: list[tuple[TopicPartition, MarkerResult]] = []
            for topic, p in pending:
                code = await self._write_one(topic, p, marker)
                if code == ErrorCode.none:
                    continue
                if code in _MARKER_SKIP:
                    log.info(
                        "transactional id %s: no marker for %s-%d (%s)",
                        c.transactional_id,
                        topic,
                        p,
                        _name(code),
                    )
                elif code == ErrorCode.invalid_producer_epoch:
                    log.warning(
                        "transactional id %s: %s-%d already holds a newer epoch of producer "
                        "%d than %d: the transaction is over there",
                        c.transactional_id,
                        topic,
                        p,
                        c.producer_id,
                        c.producer_epoch,
                    )
                elif code in _MARKER_FATAL:
                    log.error(
                        "transactional id %s: %s-%d cannot take the marker (%s); skipped",
                        c.transactional_id,
                        topic,
                        p,
                        _name(code),
                    )
                else:
                    failed.append(((topic, p), code))
            pending = [tp for tp, _ in failed]
            if pending:
                self.stats.marker_retries += len(pending)
                self._warn(c, failed, backoff)
                await self._sleep(backoff)
                backoff = self._next(backoff)
        return True

    def _warn(
        self, c: Completion, failed: list[tuple[TopicPartition, MarkerResult]], backoff: int
    ) -> None:
        now = self._runtime.scheduler.now_ms()
        last = self._warned_ms.get(c.transactional_id)
        if last is not None and now - last < WARN_INTERVAL_MS:
            return
        self._warned_ms[c.transactional_id] = now
        log.warning(
            "transactional id %s (producer %d, epoch %d): %s marker not written to %s; "
            "retrying in %d ms",
            c.transactional_id,
            c.producer_id,
            c.producer_epoch,
            "COMMIT" if c.commit else "ABORT",
            ", ".join(f"{t}-{p} ({_name(code)})" for (t, p), code in failed),
            backoff,
        )

    async def _write_complete(self, partition: int, c: Completion) -> None:
        backoff = self._config.marker_retry_backoff_ms
        while self._owner(partition, c.coordinator_epoch):
            write = self._runtime.write(partition, lambda s: s.complete_txn(c))
            try:
                await asyncio.shield(write)
                return  # written, or already completed or replaced (nothing left to do)
            except CoordinatorError as exc:
                log.info(
                    "transactional id %s: writing %s failed (%s); retrying",
                    c.transactional_id,
                    "CompleteCommit" if c.commit else "CompleteAbort",
                    exc.code.name,
                )
            await self._sleep(backoff)
            backoff = self._next(backoff)
        self._stopped(partition, c)
