"""The partition leaders' AlterPartition (56) to the active controller (Kafka's
DefaultAlterPartitionManager).

Every leader on this broker hands its ISR proposal to one sender. Proposals wait in one queue,
at most one per partition (a second while the first is unanswered gets OPERATION_NOT_ATTEMPTED
at once, as in Kafka: the leader then falls back to its committed ISR). One request is in flight
at a time and carries every queued proposal; what arrives meanwhile goes in the next one.

The channel finds the active controller and retries on NOT_CONTROLLER and on lost connections.
Whatever else keeps an answer from arriving (the channel gave up, a top-level error such as
STALE_BROKER_EPOCH while the broker re-registers) is retried with the broker epoch read again,
as Kafka does, after a backoff that doubles from ``retry_backoff_ms`` up to ``retry_backoff_max_ms``
(``retries`` counts them; a WARN names the request and the answer at most once a minute): an
answer that comes too late is ignored by the leader (it carries the request's local id), and a
leader that stops waiting cancels its ``send``, which takes its proposal out of the queue.

A partition the controller's answer leaves out (or answers under a topic id the request did not
name) is answered UNKNOWN_SERVER_ERROR, as Kafka's sender does, and leaves the queue: the
leader falls back to its committed ISR and proposes again from its next check, with what it then
knows. Resending it as it was could never get another answer (issue 27: a controller that
answered another topic id for the partition got the same request every 50 ms, forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from ..network.retry_backoff import RetryBackoff
from .isr import AlterPartitionRequest

log = logging.getLogger(__name__)

ALTER_PARTITION: Final = 56
RETRY_BACKOFF_MS: Final = 50  # Kafka's pause before resending after a top-level error
RETRY_BACKOFF_MAX_MS: Final = 1000  # Kafka's retry.backoff.max.ms


class ControllerRequests(Protocol):
    """What this needs of ``broker.quorum.controller_channel.ControllerChannel``."""

    async def request(self, api_key: int, body: Any, version: int | None = None) -> Any: ...


class Registration(NamedTuple):
    """The partition as the controller committed it (an AlterPartition answer). The answer does
    not carry the replica list: ``replicas`` is empty."""

    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...] = ()


Outcome = tuple[ErrorCode, Registration | None]
_Key = tuple[uuid.UUID, int]


@dataclass(eq=False, slots=True)
class _Proposal:
    request: AlterPartitionRequest
    answer: asyncio.Future[Outcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class AlterPartitionSender:
    def __init__(
        self,
        channel: ControllerRequests,
        broker_id: int,
        broker_epoch: Callable[[], int],
        *,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS,
    ) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._backoff = RetryBackoff(
            f"AlterPartition from broker {broker_id}",
            retry_backoff_ms,
            max(retry_backoff_ms, retry_backoff_max_ms),
            log,
        )
        self.unanswered = 0  # proposals the controller's answer left out (a metric)
        self._queued: dict[_Key, _Proposal] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def send(
        self, topic_id: uuid.UUID, partition: int, req: AlterPartitionRequest
    ) -> Outcome:
        """The controller's answer for one partition: NONE with the committed registration, or
        the partition's error (OPERATION_NOT_ATTEMPTED: not sent, or the sender closed)."""
        key = (topic_id, partition)
        if self._closed or key in self._queued:
            return ErrorCode.operation_not_attempted, None
        proposal = _Proposal(req)
        self._queued[key] = proposal
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            return await proposal.answer
        finally:
            if self._queued.get(key) is proposal:
                del self._queued[key]  # cancelled: no longer wanted

    @property
    def queued(self) -> int:
        return len(self._queued)

    @property
    def retries(self) -> int:
        """Requests sent again after a failure or a top-level error (a metric)."""
        return self._backoff.retries

    async def close(self) -> None:
        """Stop sending; every waiting ``send`` returns OPERATION_NOT_ATTEMPTED."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for proposal in self._queued.values():
            if not proposal.answer.done():
                proposal.answer.set_result((ErrorCode.operation_not_attempted, None))
        self._queued.clear()

    # -- the one request in flight ---------------------------------------------------------

    async def _run(self) -> None:
        while self._queued and not self._closed:
            batch = dict(self._queued)
            epoch = self._broker_epoch()
            try:
                response = await self._channel.request(ALTER_PARTITION, self._body(batch, epoch))
                error = _code(response.error_code)
                if error == ErrorCode.none:
                    self._answer(batch, response)
                    self._backoff.succeeded()
                    continue
                answer = f"the controller answered {error.name.upper()} (broker epoch {epoch})"
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the channel's timeout, no common version, closed
                answer = f"no answer from the controller ({e})"
            await asyncio.sleep(self._backoff.failed(answer))

    def _body(self, batch: dict[_Key, _Proposal], broker_epoch: int) -> dict[str, Any]:
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for (topic_id, partition), proposal in batch.items():
            req = proposal.request
            topics.setdefault(topic_id, []).append(
                {
                    "partition_index": partition,
                    "leader_epoch": req.leader_epoch,
                    # v3 has the epochs, v2 only the ids: the channel builds the version it picks
                    "new_isr_with_epochs": [
                        {"broker_id": b, "broker_epoch": e} for b, e in req.new_isr
                    ],
                    "new_isr": [b for b, _e in req.new_isr],
                    "leader_recovery_state": 0,
                    "partition_epoch": req.partition_epoch,
                }
            )
        return {
            "broker_id": self._broker_id,
            "broker_epoch": broker_epoch,
            "topics": [{"topic_id": t, "partitions": parts} for t, parts in topics.items()],
        }

    def _answer(self, batch: dict[_Key, _Proposal], response: Any) -> None:
        """Answer every proposal of ``batch``: with the response's outcome for it, or
        UNKNOWN_SERVER_ERROR where the response has none."""
        outcomes: dict[_Key, Outcome] = {}
        for t in response.topics:
            for p in t.partitions:
                error = _code(p.error_code)
                reg = None
                if error == ErrorCode.none:
                    reg = Registration(
                        tuple(int(b) for b in p.isr),
                        int(p.leader_id),
                        int(p.leader_epoch),
                        int(p.partition_epoch),
                    )
                key = (t.topic_id, int(p.partition_index))
                if key not in batch:
                    self._backoff.warn(
                        f"an answer for {t.topic_id}-{p.partition_index} ({error.name.upper()}), "
                        "which the request did not name: ignored"
                    )
                    continue
                outcomes[key] = (error, reg)
        for key, proposal in batch.items():
            outcome = outcomes.get(key)
            if outcome is None:
                self.unanswered += 1
                self._backoff.warn(
                    f"no answer for {key[0]}-{key[1]}: dropped as UNKNOWN_SERVER_ERROR "
                    "(the leader proposes again from its committed ISR)"
                )
                outcome = (ErrorCode.unknown_server_error, None)
            if self._queued.get(key) is proposal:
                del self._queued[key]
            if not proposal.answer.done():
                proposal.answer.set_result(outcome)


def _code(value: Any) -> ErrorCode:
    try:
        return ErrorCode(int(getattr(value, "value", value)))
    except ValueError:
        return ErrorCode.unknown_server_error
