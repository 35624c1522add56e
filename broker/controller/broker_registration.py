"""Broker registration (register and unfence this node) and finalized feature levels."""

import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .controller_base import ControllerBase
from .record_types import FeatureLevelRecord, RegisterBrokerRecord, UnfenceBrokerRecord


class BrokerRegistrationMixin(ControllerBase):
    """``register_broker`` and ``finalize_features`` for Controller."""

    async def register_broker(
        self,
        endpoints: Sequence[tuple[str, str, int, int]],
        rack: str | None,
        features: Mapping[str, int],
    ) -> None:
        """Register (or re-register) this node and unfence it; set finalized features once."""
        async with self._lock:
            img = self._image()
            epoch = img.offset + 1
            ep_cls = sys.modules[RegisterBrokerRecord.__module__].BrokerEndpoint
            rec = RegisterBrokerRecord(
                broker_id=self._node_id,
                incarnation_id=uuid.uuid4(),
                broker_epoch=epoch,
                end_points=tuple(
                    ep_cls(name=n, host=h, port=p, security_protocol=sp)
                    for n, h, p, sp in endpoints
                ),
                features=(),
                rack=rack,
                fenced=True,
            )
            records: list[Any] = [rec, UnfenceBrokerRecord(id=self._node_id, epoch=epoch)]
            for name, level in features.items():
                if img.features.get(name) != level:
                    records.append(FeatureLevelRecord(name=name, feature_level=level))
            await self._commit(records)

    async def finalize_features(
        self, features: Mapping[str, int], bootstrap: Sequence[Any] = ()
    ) -> None:
        """Record the finalized feature levels of a freshly formatted cluster (the log holds no
        metadata.version yet) with the bootstrap records of its format (``--add-scram``
        credentials) in the same batch: what its first active controller writes first. Once
        written, levels change only through UpdateFeatures (a later controller does not put
        back a level an operator changed or disabled)."""
        async with self._lock:
            img = self._image()
            if "metadata.version" in img.features:
                return
            records: list[Any] = [
                FeatureLevelRecord(name=name, feature_level=level)
                for name, level in features.items()
                if level > 0
            ]
            records.extend(bootstrap)
            await self._commit(records)
