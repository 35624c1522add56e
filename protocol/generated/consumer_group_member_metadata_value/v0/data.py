"""
Generated from ``schemas/ConsumerGroupMemberMetadataValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


import datetime

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    """Static membership instance id, or null."""
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    """Client rack, or null."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """Client id."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """Client host."""
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """Subscribed topic names."""
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"})
    """Subscribed topic regex, or null."""
    rebalance_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"}, default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)))
    """Time the member has to revoke partitions."""
    server_assignor: str | None = field(metadata={"kafka_type": "string"})
    """Requested server assignor, or null."""
