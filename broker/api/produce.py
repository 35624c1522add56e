"""Produce v3-v13 (hot path): records are appended as the bytes the client sent.

The request is parsed by `protocol.encoders.produce.parse_produce_request` (records stay views into
the frame) and the response written by the hand encoder. acks=0 gets no response. Errors per
partition follow Kafka: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID from v13), NOT_LEADER_OR_FOLLOWER,
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_REQUIRED_ACKS, NOT_ENOUGH_REPLICAS, and the producer-
state errors (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH). With an authorizer, a topic
the principal may not WRITE gets TOPIC_AUTHORIZATION_FAILED (before any existence check, so
existence is not disclosed), and every partition of a transactional request whose id it may not
WRITE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build, error_code
from protocol.encoders.produce import encode_produce_response, parse_produce_request
from protocol.errors import MirrorErrorCode, ProtocolError, RequestBodyError
from protocol.readers import Buffer
from protocol.registry import REGISTRY

from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .services import Services

log = logging.getLogger(__name__)

API_KEY = 0
VERSIONS = (3, 13)


class ProduceApi:
    def __init__(self, services: Services, on_bytes_in: Any = None) -> None:
        self.s = services
        self._on_bytes_in = on_bytes_in

    async def handle_raw(
        self, ctx: RequestContext, frame: memoryview, pos: int
    ) -> list[Buffer] | None:
        version = ctx.api_version
        try:
            req = parse_produce_request(frame, pos, version)
        except ProtocolError as e:
            h = ctx.header
            raise RequestBodyError(
                str(e), h.api_key, version, h.correlation_id, h.client_id
            ) from None
        s = self.s
        img = s.image()
        now = s.now_ms()
        acks = req.acks
        topics_out: list[dict[str, Any]] = []
        appended = False
        authz = s.authorizer
        txn_denied = (
            authz is not None
            and req.transactional_id is not None
            and not allowed(
                authz, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
            )
        )
        for t in req.topics:
            name: str | None
            if t.name is not None:
                name = t.name
                topic = img.topics.get(name)
                missing = ErrorCode.unknown_topic_or_partition
            else:
                topic = img.topic_by_id(t.topic_id) if t.topic_id else None
                name = topic.name if topic else None
                missing = ErrorCode.unknown_topic_id
            denied: ErrorCode | None = None
            if txn_denied:
                denied = ErrorCode.transactional_id_authorization_failed
            elif (
                authz is not None
                and name is not None
                and not allowed(authz, ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
            ):
                denied = ErrorCode.topic_authorization_failed
            parts_out: list[dict[str, Any]] = []
            for p in t.partitions:
                row: dict[str, Any] = {
                    "index": p.index,
                    "base_offset": -1,
                    "log_append_time": -1,
                    "log_start_offset": -1,
                }
                parts_out.append(row)
                if acks not in (-1, 0, 1):
                    row["error_code"] = ErrorCode.invalid_required_acks
                    continue
                if denied is not None:
                    row["error_code"] = denied
                    continue
                hosted = s.replicas.get(name, p.index) if name is not None else None
                if topic is None or hosted is None:
                    row["error_code"] = (
                        missing if topic is None else ErrorCode.unknown_topic_or_partition
                    )
                    continue
                assert name is not None
                if not hosted.is_leader:
                    row["error_code"] = ErrorCode.not_leader_or_follower
                    continue
                if not s.writable(name, p.index):
                    row["error_code"] = MirrorErrorCode.READ_ONLY_TOPIC
                    row["error_message"] = f"Topic {name} is a mirror topic and read-only"
                    continue
                if p.records is None or len(p.records) == 0:
                    row["error_code"] = ErrorCode.corrupt_message
                    row["error_message"] = "Produce request contained no records"
                    continue
                if acks == -1 and len(img.topics[name].partitions[p.index].isr) < self._min_isr(
                    name
                ):
                    row["error_code"] = ErrorCode.not_enough_replicas
                    continue
                try:
                    result = hosted.log.append_as_leader(p.records, hosted.leader_epoch, now_ms=now)
                except Exception as e:  # LogAppendError carries a Kafka error code
                    code = getattr(e, "error_code", None)
                    if code is None:
                        log.exception("append to %s-%d failed", name, p.index)
                        code = ErrorCode.unknown_server_error
                    row["error_code"] = error_code(int(code))
                    row["error_message"] = str(e)
                    continue
                hosted.log.high_watermark = hosted.log.log_end_offset
                appended = True
                row["base_offset"] = result.first_offset
                row["log_append_time"] = result.log_append_time_ms
                row["log_start_offset"] = result.log_start_offset
                if self._on_bytes_in is not None:
                    self._on_bytes_in(name, len(p.records))
            topics_out.append({"name": name, "topic_id": t.topic_id, "partitions": parts_out})
        if appended:
            s.replicas.notify_append()
        if acks == 0:
            return None
        cls = REGISTRY.spec(API_KEY).response_type(version)
        resp: Any = build(cls, {"responses": [_topic(t) for t in topics_out], "throttle_time": 0})
        return [encode_produce_response(resp, version)]

    def _min_isr(self, topic: str) -> int:
        cfg = self.s.image().config(2, topic).get("min.insync.replicas")
        if cfg is not None:
            return int(cfg)
        return int(getattr(self.s.config, "min_insync_replicas", 1))


def _append_time(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _topic(t: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": t["name"] or "",
        "topic_id": t["topic_id"],
        "partition_responses": [
            {
                "index": p["index"],
                "error_code": p.get("error_code", ErrorCode.none),
                "base_offset": p["base_offset"],
                "log_append_time": _append_time(p["log_append_time"]),
                "log_start_offset": p["log_start_offset"],
                "record_errors": (),
                "error_message": p.get("error_message"),
            }
            for p in t["partitions"]
        ],
    }
