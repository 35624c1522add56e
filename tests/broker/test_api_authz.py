"""Handlers with an authorizer: the mirror RPCs on the KIP's CLUSTER_MIRROR resource, configs and
topic admin, driven with real controllers, ACLs stored as metadata records and kio requests."""

import asyncio
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.configs import ConfigsApi
from broker.api.context import RequestContext
from broker.api.mirror import MirrorApi
from broker.api.services import Services
from broker.api.topics import TopicsApi
from broker.config.group_configs import GROUP_RESOURCE
from broker.controller.acls import AclController
from broker.metadata.image import BROKER_RESOURCE, MIRROR_RESOURCE, TOPIC_RESOURCE
from broker.quorum.driver import NotLeaderError
from broker.security.acls import (
    Acl,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from broker.security.authorizer import Authorizer
from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from .test_mirror_controller import _services, _with_topics

Op, Res = AclOperation, ResourceType
ME = "User:ANONYMOUS"


@dataclass
class Ctx:
    api_version: int
    principal: str = ME
    peer_host: str = "127.0.0.1"


def _req(key: int, version: int, data: dict[str, Any]) -> Any:
    return build(REGISTRY.spec(key).request_type(version), data)


def _allow(rtype: ResourceType, name: str, op: AclOperation) -> Acl:
    return Acl(rtype, name, PatternType.LITERAL, ME, "*", op, PermissionType.ALLOW)


def _setup(*acls: Acl) -> tuple[Any, Any, Services]:
    q, c, mc = _with_topics("a", "b", "c")
    asyncio.run(mc.add_topics("m", ["a", "b"]))
    asyncio.run(AclController(c).create_acls(list(acls)))
    return q, mc, _services(q, c, Authorizer(lambda: q.image.acls))


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


def _ctx(version: int = 0) -> RequestContext:
    return Ctx(version)  # type: ignore[return-value]


def test_mirror_rpcs_check_cluster_mirror_and_topic_acls() -> None:
    _q, mc, s = _setup(
        _allow(Res.CLUSTER_MIRROR, "m", Op.ALTER),  # implies DESCRIBE
        _allow(Res.TOPIC, "a", Op.READ),
    )
    api = MirrorApi(s, mc, progress=lambda _m, _t, _p: (0, 0, 0, 0))

    def pause(mirror: str, *names: str) -> Any:
        topics = [{"topic_id": None, "topic_name": n} for n in names]
        return run(
            api.pause_topics(_ctx(), _req(102, 0, {"mirror_name": mirror, "topics": topics}))
        )

    resp = pause("m", "a", "b")
    assert int(resp.error_code) == 0
    assert [(t.name, int(t.error_code)) for t in resp.topics] == [
        ("a", 0),
        ("b", ErrorCode.topic_authorization_failed.value),
    ]
    assert int(pause("other", "a").error_code) == MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED
    listed = run(api.list_mirrors(_ctx(), _req(98, 0, {})))
    assert [m.mirror_name for m in listed.mirrors] == ["m"]
    described = run(
        api.describe_mirrors(
            _ctx(),
            _req(99, 0, {"mirror_names": ["m", "other"], "include_authorized_operations": False}),
        )
    )
    assert [(m.mirror_name, int(m.error_code)) for m in described.mirrors] == [
        ("m", 0),
        ("other", MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED),
    ]
    created = run(
        api.create_mirror(
            _ctx(),
            _req(
                94,
                0,
                {"mirror_name": "new", "config": [{"name": "bootstrap.servers", "value": "x:1"}]},
            ),
        )
    )
    assert int(created.error_code) == MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED
    deleted = run(api.delete_mirror(_ctx(), _req(104, 0, {"mirror_name": "other"})))
    assert int(deleted.error_code) == MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED
    assert "other" in mc_mirrors(s)


def mc_mirrors(s: Services) -> set[str]:
    return {name for rtype, name in s.image().configs if rtype == MIRROR_RESOURCE}


def test_configs_need_describe_and_alter_configs_on_their_resource() -> None:
    _q, _mc, s = _setup(
        _allow(Res.TOPIC, "a", Op.ALTER_CONFIGS),  # implies DESCRIBE_CONFIGS
        _allow(Res.CLUSTER_MIRROR, "m", Op.DESCRIBE_CONFIGS),
    )
    api = ConfigsApi(s)
    resources = [
        (TOPIC_RESOURCE, "a"),
        (TOPIC_RESOURCE, "b"),
        (MIRROR_RESOURCE, "m"),
        (MIRROR_RESOURCE, "other"),
        (BROKER_RESOURCE, "1"),
    ]
    req = _req(
        32,
        4,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": None}
                for t, n in resources
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    resp = run(api.describe_configs(_ctx(4), req))
    assert [int(r.error_code) for r in resp.results] == [
        0,
        ErrorCode.topic_authorization_failed.value,
        0,
        MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED,
        ErrorCode.cluster_authorization_failed.value,
    ]
    alter = _req(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": t,
                    "resource_name": n,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "5"}],
                }
                for t, n in ((TOPIC_RESOURCE, "a"), (TOPIC_RESOURCE, "b"))
            ],
            "validate_only": False,
        },
    )
    resp = run(api.incremental_alter_configs(_ctx(1), alter))
    assert [int(r.error_code) for r in resp.responses] == [
        0,
        ErrorCode.topic_authorization_failed.value,
    ]
    assert s.image().config(TOPIC_RESOURCE, "a").get("retention.ms") == "5"
    assert "retention.ms" not in s.image().config(TOPIC_RESOURCE, "b")


def test_topic_admin_needs_create_delete_alter() -> None:
    _q, _mc, s = _setup(
        _allow(Res.TOPIC, "new-ok", Op.CREATE),
        _allow(Res.TOPIC, "c", Op.DELETE),
    )
    api = TopicsApi(s)
    specs = [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for n in ("new-ok", "new-denied")
    ]
    created = run(
        api.create_topics(
            _ctx(7), _req(19, 7, {"topics": specs, "timeout": 1000, "validate_only": False})
        )
    )
    assert [(t.name, int(t.error_code)) for t in created.topics] == [
        ("new-ok", 0),
        ("new-denied", ErrorCode.topic_authorization_failed.value),
    ]
    # CREATE on the topic does not give DESCRIBE_CONFIGS: the new topic's configs are withheld
    assert created.topics[0].configs is None
    deleted = run(
        api.delete_topics(_ctx(5), _req(20, 5, {"topic_names": ["c", "b"], "timeout": 1000}))
    )
    assert [(r.name, int(r.error_code)) for r in deleted.responses] == [
        ("c", 0),
        ("b", ErrorCode.topic_authorization_failed.value),
    ]
    assert "b" in s.image().topics and "c" not in s.image().topics
    grown = run(
        api.create_partitions(
            _ctx(3),
            _req(
                37,
                3,
                {
                    "topics": [{"name": "a", "count": 4, "assignments": None}],
                    "timeout": 1000,
                    "validate_only": False,
                },
            ),
        )
    )
    assert [(r.name, int(r.error_code)) for r in grown.results] == [
        ("a", ErrorCode.topic_authorization_failed.value)
    ]


def test_a_request_refused_whole_asks_no_controller() -> None:
    """Every resource refused: nothing reaches the controller, so a controller that is not the
    active one answers the authorization error too, not NOT_CONTROLLER or a failure."""
    _q, _mc, s = _setup()

    class NotLeading:
        async def _raise(self, *_args: Any) -> list[Any]:
            raise NotLeaderError(2, 1)

        delete_topics = create_partitions = alter_configs = _raise

    s.controller = NotLeading()
    api = TopicsApi(s)
    deleted = run(
        api.delete_topics(_ctx(6), _req(20, 6, {"topics": [{"name": "b"}], "timeout": 1000}))
    )
    assert [(r.name, int(r.error_code)) for r in deleted.responses] == [
        ("b", ErrorCode.topic_authorization_failed.value)
    ]
    grown = run(
        api.create_partitions(
            _ctx(3),
            _req(37, 3, {"topics": [{"name": "a", "count": 4}], "timeout": 1000}),
        )
    )
    assert [(r.name, int(r.error_code)) for r in grown.results] == [
        ("a", ErrorCode.topic_authorization_failed.value)
    ]
    configs = ConfigsApi(s)
    resource = {"resource_type": 2, "resource_name": "a"}
    altered = run(
        configs.alter_configs(
            _ctx(2),
            _req(33, 2, {"resources": [{**resource, "configs": [{"name": "x", "value": "1"}]}]}),
        )
    )
    incremental = run(
        configs.incremental_alter_configs(
            _ctx(1),
            _req(
                44,
                1,
                {"resources": [{**resource, "configs": [{"name": "x", "config_operation": 0}]}]},
            ),
        )
    )
    for resp in (altered, incremental):
        assert [int(r.error_code) for r in resp.responses] == [
            ErrorCode.topic_authorization_failed.value
        ]


def test_group_configs_need_describe_and_alter_configs_on_the_group() -> None:
    _q, _mc, s = _setup(_allow(Res.GROUP, "mine", Op.ALTER_CONFIGS))
    api = ConfigsApi(s)

    def describe(name: str) -> Any:
        req = _req(
            32,
            4,
            {
                "resources": [
                    {
                        "resource_type": GROUP_RESOURCE,
                        "resource_name": name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        (r,) = run(api.describe_configs(_ctx(4), req)).results
        return r

    assert int(describe("mine").error_code) == 0
    assert int(describe("theirs").error_code) == ErrorCode.group_authorization_failed.value
    alter = _req(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": n,
                    "configs": [
                        {
                            "name": "share.auto.offset.reset",
                            "config_operation": 0,
                            "value": "earliest",
                        }
                    ],
                }
                for n in ("mine", "theirs")
            ],
            "validate_only": False,
        },
    )
    resp = run(api.incremental_alter_configs(_ctx(1), alter))
    assert [int(r.error_code) for r in resp.responses] == [
        0,
        ErrorCode.group_authorization_failed.value,
    ]
    assert s.image().config(GROUP_RESOURCE, "mine") == {"share.auto.offset.reset": "earliest"}
    assert not s.image().config(GROUP_RESOURCE, "theirs")
