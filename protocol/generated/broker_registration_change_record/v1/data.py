"""
Generated from ``schemas/BrokerRegistrationChangeRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.types import BrokerId
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i64
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    """Broker id."""
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    """Broker epoch of the registration."""
    fenced: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
    """-1 unfenced, 0 unchanged, 1 fenced."""
    in_controlled_shutdown: i8 = field(metadata={"kafka_type": "int8", "tag": 1}, default=i8(0))
    """0 unchanged, 1 now in controlled shutdown."""
