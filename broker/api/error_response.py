"""One error for a whole request, answered in the request's own response shape.

Kafka's ``AbstractRequest.getErrorResponse(e)``: when a request fails as a whole (the active
controller could not be reached to serve a forwarded request, say), each entity the request
names gets the error in the per-entity results the client reads (a CreateTopics answer lists
every topic asked for with the error), and responses with a top-level error code carry it there.
"""

from collections.abc import Callable, Iterable
from typing import Any

from protocol.build import build
from protocol.registry import REGISTRY, Registry

# (request body, error entry fields) -> the response's field values
_Shape = Callable[[Any, dict[str, Any]], dict[str, Any]]


def _each(items: Iterable[Any] | None, err: dict[str, Any], **copy: str) -> list[dict[str, Any]]:
    """One error entry per request item, copying fields (response name = request name)."""
    return [
        {**err, **{out: getattr(item, src, None) for out, src in copy.items()}}
        for item in items or ()
    ]


def _create_topics(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    return {"topics": _each(req.topics, err, name="name")}


def _delete_topics(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    topics = getattr(req, "topics", None)
    if topics is not None:  # v6+: names or topic ids
        return {"responses": _each(topics, err, name="name", topic_id="topic_id")}
    return {"responses": [{**err, "name": n} for n in getattr(req, "topic_names", ())]}


def _create_partitions(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    return {"results": _each(req.topics, err, name="name")}


def _alter_configs(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    return {
        "responses": _each(
            req.resources, err, resource_type="resource_type", resource_name="resource_name"
        )
    }


def _create_acls(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    return {"results": _each(req.creations, err)}


def _delete_acls(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    return {"filter_results": [{**err, "matching_acls": []} for _ in req.filters]}


def _alter_client_quotas(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    return {
        "entries": [
            {
                **err,
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity
                ],
            }
            for entry in req.entries
        ]
    }


def _alter_user_scram_credentials(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    users = dict.fromkeys(c.name for c in (*req.deletions, *req.upsertions))
    return {"results": [{**err, "user": u} for u in users]}


def _mirror_topics(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    # KIP-1279 mirror RPCs: the error at the top and for each topic named
    return {
        **err,
        "mirror_name": req.mirror_name,
        "topics": [{**err, "name": t.topic_name} for t in req.topics],
    }


def _elect_leaders(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    results = [
        {"topic": t.topic, "partition_result": [{**err, "partition_id": p} for p in t.partitions]}
        for t in req.topic_partitions or ()
    ]
    return {**err, "replica_election_results": results}


def _alter_reassignments(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    results = [
        {
            "name": t.name,
            "partitions": [{**err, "partition_index": p.partition_index} for p in t.partitions],
        }
        for t in req.topics
    ]
    return {**err, "responses": results}


def _list_reassignments(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    # Kafka lists each partition asked for, with nothing but its index
    topics = [
        {"name": t.name, "partitions": [{"partition_index": p} for p in t.partition_indexes]}
        for t in req.topics or ()
    ]
    return {**err, "topics": topics}


def _offset_commit(req: Any, err: dict[str, Any]) -> dict[str, Any]:
    # OffsetCommit / TxnOffsetCommit: no top-level error, one per partition
    code = {"error_code": err["error_code"]}
    topics = [
        {
            "name": getattr(t, "name", ""),
            "topic_id": getattr(t, "topic_id", None),
            "partitions": [{**code, "partition_index": p.partition_index} for p in t.partitions],
        }
        for t in req.topics or ()
    ]
    return {"topics": topics}


_SHAPES: dict[int, _Shape] = {
    8: _offset_commit,
    28: _offset_commit,
    19: _create_topics,
    20: _delete_topics,
    37: _create_partitions,
    43: _elect_leaders,
    45: _alter_reassignments,
    46: _list_reassignments,
    33: _alter_configs,
    44: _alter_configs,
    30: _create_acls,
    31: _delete_acls,
    49: _alter_client_quotas,
    51: _alter_user_scram_credentials,
    95: _mirror_topics,  # AddTopicsToMirror
    96: _mirror_topics,  # RemoveTopicsFromMirror
    102: _mirror_topics,  # PauseMirrorTopics
    103: _mirror_topics,  # ResumeMirrorTopics
}


def error_response(
    api_key: int,
    version: int,
    request: Any,
    code: int,
    message: str | None,
    registry: Registry = REGISTRY,
) -> Any:
    """The response body of ``api_key`` v``version`` reporting ``code`` for all of ``request``.

    APIs without an entry here get the error in their top-level ``error_code`` (and
    ``error_message``) fields, where the response has them.
    """
    err: dict[str, Any] = {"error_code": code, "error_message": message}
    shape = _SHAPES.get(api_key)
    data = shape(request, err) if shape is not None else dict(err)
    # build() keeps only the fields this version of the response has
    return build(registry.spec(api_key).response_type(version), data)
