"""What every part of the controller shares: the one request lock, the image, the quorum to
commit through, and the small interface sibling controllers (mirrors.py) use."""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..metadata.image import MetadataImage
from .validators import Validators


class ControllerLock:
    """The controller's one lock, taken only once the image holds every record the quorum's log
    had when this node became leader (``ready``): a new active controller must not check a
    request against an image that lacks what the previous one committed (Kafka's controller
    replays the log up to its LeaderChange before it serves writes)."""

    def __init__(self, ready: Callable[[], Awaitable[None]] | None) -> None:
        self._ready = ready
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        if self._ready is not None:
            await self._ready()
        await self._lock.acquire()

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
    ) -> None:
        self._quorum = quorum
        self._image = image
        self._v = validators
        self._node_id = node_id
        self._lock = ControllerLock(ready)

    async def _commit(self, records: Sequence[Any]) -> int:
        """Commit ``records``; the offset of the last one (of the last committed record when
        there are none)."""
        return int(await self._quorum.append(records)) if records else self._image().offset

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
