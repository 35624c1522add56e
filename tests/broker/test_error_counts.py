"""Every error_code field of a decoded response is counted, nested ones included."""

import datetime

from kio.schema.create_topics.v7.response import CreatableTopicResult, CreateTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from broker.api.error_counts import error_counts


def test_nested_error_codes_are_counted() -> None:
    def topic(name: str, code: ErrorCode) -> CreatableTopicResult:
        return CreatableTopicResult(
            name=TopicName(name),
            topic_id=None,
            error_code=code,
            error_message=None,
            num_partitions=i32(1),
            replication_factor=i16(1),
            configs=None,
        )

    resp = CreateTopicsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=(
            topic("a", ErrorCode.none),
            topic("b", ErrorCode.topic_already_exists),
            topic("c", ErrorCode.none),
        ),
    )
    assert error_counts(resp) == {0: 2, ErrorCode.topic_already_exists: 1}
    assert error_counts(None) == {}
