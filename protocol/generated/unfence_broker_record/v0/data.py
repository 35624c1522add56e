"""
Generated from ``schemas/UnfenceBrokerRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.types import BrokerId
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    id: BrokerId = field(metadata={"kafka_type": "int32"})
    """Broker id."""
    epoch: i64 = field(metadata={"kafka_type": "int64"})
    """Broker epoch being unfenced."""
