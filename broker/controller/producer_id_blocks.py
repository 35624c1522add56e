"""AllocateProducerIds: hands out blocks of producer ids, recorded so no id is given twice."""

from typing import Final

from .controller_base import ControllerBase
from .record_types import ProducerIdsRecord

PRODUCER_ID_BLOCK: Final = 1000


class ProducerIdBlocksMixin(ControllerBase):
    """``allocate_producer_ids`` for Controller."""

    async def allocate_producer_ids(
        self, broker_epoch: int, broker_id: int | None = None
    ) -> tuple[int, int]:
        """A block (first id, size) of producer ids for a broker (this node by default)."""
        async with self._lock:
            start = self._image().next_producer_id
            await self._commit(
                [
                    ProducerIdsRecord(
                        broker_id=self._node_id if broker_id is None else broker_id,
                        broker_epoch=broker_epoch,
                        next_producer_id=start + PRODUCER_ID_BLOCK,
                    )
                ]
            )
            return start, PRODUCER_ID_BLOCK
