"""The answer to a KIP-848 ConsumerGroupHeartbeat or a KIP-932 ShareGroupHeartbeat: both carry
the member's id and epoch, the heartbeat interval and the assignment as topic ids with
partitions, in the same shape (their kio classes differ, so the response class is passed in)."""

import datetime
from typing import Any

from kio.static.primitive import i32, i32Timedelta

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def heartbeat_response(resp_cls: Any, result: Any, ok: bool) -> Any:
    """``result``: the coordinator's heartbeat result (error, message, member id and epoch,
    heartbeat interval, assignment by topic id); ``ok``: it carries no error."""
    mod = __import__(resp_cls.__module__, fromlist=["Assignment", "TopicPartitions"])
    assignment = None
    if ok and result.assignment is not None:
        assignment = mod.Assignment(
            topic_partitions=tuple(
                mod.TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in sorted(ps)))
                for t, ps in sorted(result.assignment.items())
            )
        )
    return resp_cls(
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=i32(result.member_epoch),
        heartbeat_interval=i32Timedelta.parse(
            datetime.timedelta(milliseconds=result.heartbeat_interval_ms)
        ),
        assignment=assignment,
    )
