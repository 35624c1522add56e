"""OffsetForLeaderEpoch v2-v4 (API key 23; Kafka 4 removed v0-v1, KIP-896): where a leader
epoch ends in a partition's log.

Followers ask it of the leader to find where their log diverges; consumers (KIP-320, ReplicaId
-1, or -2 for a debugging client) to validate their position after a leader change. Only the
leader answers, whoever asks, as Kafka's ReplicaManager.lastOffsetForLeaderEpoch does
(fetchOnlyFromLeader): per partition,

- UNKNOWN_TOPIC_OR_PARTITION: the metadata has no such partition;
- NOT_LEADER_OR_FOLLOWER: another node hosts it, or this node hosts it without leading it;
- FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: the CurrentLeaderEpoch (-1 skips the check)
  is older / newer than this leader's, checked before leadership as Kafka does;
- otherwise the leader epoch cache's answer (``PartitionLog.end_offset_for_epoch``, Kafka's
  LeaderEpochFileCache.endOffsetFor): the largest epoch not above the one asked for and the
  offset where it ends, -1/-1 when the cache cannot place it.

Authorization: CLUSTER_ACTION on the cluster (another broker) may ask for any topic; anyone else
needs DESCRIBE on each topic, and the topics denied come last with TOPIC_AUTHORIZATION_FAILED.
"""

from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..replication.replica_manager import leader_epoch_error
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY: Final = 23
VERSIONS: Final = (2, 4)  # Kafka 4.1's range: CurrentLeaderEpoch; v3+ ReplicaId; v4 flexible


class LeaderEpochsApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(
                API_KEY,
                self.offset_for_leader_epoch,
                min_version=VERSIONS[0],
                max_version=VERSIONS[1],
            )
        ]

    async def offset_for_leader_epoch(self, ctx: RequestContext, req: Any) -> Any:
        authz = self.s.authorizer
        any_topic = allowed_on_cluster(authz, ctx, AclOperation.CLUSTER_ACTION)
        answered, denied = [], []
        for t in req.topics:
            if any_topic or allowed(authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic):
                answered.append(
                    {
                        "topic": t.topic,
                        "partitions": [self._end_offset(t.topic, p) for p in t.partitions],
                    }
                )
            else:
                denied.append(
                    {
                        "topic": t.topic,
                        "partitions": [
                            _row(p.partition, ErrorCode.topic_authorization_failed)
                            for p in t.partitions
                        ],
                    }
                )
        cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": answered + denied})

    def _end_offset(self, topic: str, p: Any) -> dict[str, Any]:
        hosted = self.s.replicas.get(topic, p.partition)
        if hosted is None:
            return _row(p.partition, self.s.not_hosted_error(topic, p.partition))
        error = leader_epoch_error(hosted, getattr(p, "current_leader_epoch", -1))
        if error is not None:
            return _row(p.partition, error)
        if not hosted.is_leader:
            return _row(p.partition, ErrorCode.not_leader_or_follower)
        epoch, end = hosted.log.end_offset_for_epoch(p.leader_epoch)
        return _row(p.partition, ErrorCode.none, epoch, end)


def _row(partition: int, error: ErrorCode, epoch: int = -1, end: int = -1) -> dict[str, Any]:
    return {"partition": partition, "error_code": error, "leader_epoch": epoch, "end_offset": end}
