"""
Generated from ``schemas/RegisterBrokerRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.types import BrokerId
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i64
from kio.static.primitive import u16


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """Listener name."""
    host: str = field(metadata={"kafka_type": "string"})
    """Host name."""
    port: u16 = field(metadata={"kafka_type": "uint16"})
    """Port number."""
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})
    """Security protocol id of the listener."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """Feature name."""
    min_supported_version: i16 = field(metadata={"kafka_type": "int16"})
    """Lowest supported level."""
    max_supported_version: i16 = field(metadata={"kafka_type": "int16"})
    """Highest supported level."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    """Broker id."""
    incarnation_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Random id of this broker process run."""
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    """Broker epoch the controller handed out for this registration."""
    end_points: tuple[BrokerEndpoint, ...]
    """Listeners the broker can be reached on."""
    features: tuple[BrokerFeature, ...]
    """Feature version ranges the broker supports."""
    rack: str | None = field(metadata={"kafka_type": "string"})
    """Rack of the broker, or null."""
    fenced: bool = field(metadata={"kafka_type": "bool"}, default=True)
    """Whether the broker starts out fenced."""
