"""What every part of the controller shares: the one request lock, the written state it
validates against, the quorum to commit through, and the small interface sibling controllers
(mirrors.py) use."""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..metadata.image import MetadataImage
from .validators import Validators
from .written_state import ApplyBatch, WrittenState


@runtime_checkable
class WritableQuorum(Protocol):
    """The metadata quorum as the controller writes to it: the append itself (synchronous, so
    the written state holds the batch before anything else can run) apart from the wait for
    its commit. ``NotLeaderError`` (broker.quorum.driver) when this node does not lead, or
    when the epoch ended before the batch committed."""

    def leader_epoch(self) -> int | None: ...

    def begin_append(self, records: Sequence[Any]) -> tuple[int, int]:
        """Append; (leader epoch, offset of the last record)."""
        ...

    async def wait_committed(self, epoch: int, last_offset: int) -> None:
        """Until the batch is committed and applied to the committed image."""
        ...


class ControllerLock:
    """The controller's one lock. Once taken, it waits until the image holds every record the
    quorum's log had when this node became leader (``ready``): a new active controller must not
    check a request against an image that lacks what the previous one committed (Kafka's
    controller replays the log up to its LeaderChange before it serves writes). ``ready`` is
    awaited under the lock, not before it: a request that queued on the lock in one leader
    epoch may get it in a later one."""

    def __init__(self, ready: Callable[[], Awaitable[None]] | None) -> None:
        self._ready = ready
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        if self._ready is not None:
            try:
                await self._ready()
            except BaseException:
                self._lock.release()
                raise

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class ControllerBase:
    """State and commit path every controller part uses (one lock: requests are serialized)."""

    def __init__(
        self,
        quorum: Any,
        image: Callable[[], MetadataImage],
        validators: Validators,
        node_id: int,
        ready: Callable[[], Awaitable[None]] | None = None,
        apply: ApplyBatch | None = None,
    ) -> None:
        """``image()``: the committed image. ``apply``: how a batch is applied to an image
        (the node's opens secrets at rest). A quorum that is not a ``WritableQuorum`` (tests'
        in-memory ones) commits within ``append``: the committed image is then the written one."""
        self._quorum = quorum
        self._v = validators
        self._node_id = node_id
        self._lock = ControllerLock(ready)
        self._writable = isinstance(quorum, WritableQuorum)
        leader_epoch = quorum.leader_epoch if self._writable else (lambda: None)
        self.written = WrittenState(image, leader_epoch, *(() if apply is None else (apply,)))
        # every part validates against the written state
        self._image: Callable[[], MetadataImage] = self.written.image

    async def _commit(self, records: Sequence[Any]) -> int:
        """Commit ``records``; the offset of the last one (of the last written record when
        there are none). The written state holds them from the moment they are appended, so
        a caller cancelled while it waits for the commit leaves no gap in what the next request
        is checked against."""
        if not records:
            return self._image().offset
        if not self._writable:
            return int(await self._quorum.append(records))
        epoch, last = self._quorum.begin_append(records)
        self.written.appended(epoch, last, records)
        await self._quorum.wait_committed(epoch, last)
        return int(last)

    # -- for sibling controllers (mirrors.py) that share this lock, image and quorum ----------

    @property
    def lock(self) -> ControllerLock:
        return self._lock

    def current_image(self) -> MetadataImage:
        return self._image()

    async def commit(self, records: Sequence[Any]) -> int:
        return await self._commit(records)

    def seal(self, resource_type: int, name: str, key: str, value: str) -> str:
        """The value a ConfigRecord stores for ``key=value`` (encoded when it is a secret)."""
        secrets = self._v.secrets
        return value if secrets is None else secrets.seal(resource_type, name, key, value)

    def validate_topic_config(self, key: str, value: str) -> str:
        return self._v.topic_config(key, value)
