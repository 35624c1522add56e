"""Mirror controller operations (KIP-1279) over an in-memory one-voter quorum, plus the
AddTopicsToMirror handler against a fake source."""

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.mirror import MirrorApi, is_topic_pattern
from broker.api.services import Services
from broker.controller import mirror_config, mirror_patterns
from broker.controller.controller import (
    DELETE,
    SET,
    ConfigChange,
    ConfigValidationError,
    Controller,
    TopicSpec,
    Validators,
)
from broker.controller.mirrors import MirrorController, mirror_topics
from broker.metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE
from protocol.errors import MirrorErrorCode as M
from protocol.generated.add_topics_to_mirror.v0.request import TopicData
from protocol.registry import REGISTRY

from .test_controller_image import MemoryQuorum

SRC = {"bootstrap.servers": "src:9092"}


def _topic_config(key: str, value: str) -> str:
    known = ("retention.ms", "cleanup.policy", "min.insync.replicas", "compression.type")
    if key not in (*known, "segment.bytes", "mirror.name"):
        raise ConfigValidationError(f"Unknown topic config name: {key}")
    if key == "retention.ms" and not value.lstrip("-").isdigit():
        raise ConfigValidationError("bad retention.ms")
    return value


def _setup() -> tuple[MemoryQuorum, Controller, MirrorController]:
    q = MemoryQuorum()
    v = Validators(topic_config=_topic_config, broker_config=lambda k, v: v, default_partitions=2)
    c = Controller(q, lambda: q.image, v, node_id=1)
    asyncio.run(c.register_broker([("PLAINTEXT", "localhost", 9092, 0)], None, {}))
    return q, c, MirrorController(c, state_topic_partitions=3, state_topic_replication_factor=1)


def _mirror_name(q: MemoryQuorum, topic: str) -> str | None:
    return q.image.config(TOPIC_RESOURCE, topic).get("mirror.name")


@pytest.mark.parametrize("name", ["", "a/b", "m.removed", "m.paused", ".", "x" * 250, "sp ace"])
def test_create_mirror_rejects_bad_names(name: str) -> None:
    q, _c, mc = _setup()
    code, msg = asyncio.run(mc.create_mirror(name, SRC))
    assert code == M.INVALID_MIRROR_NAME and msg
    assert not any(rt == MIRROR_RESOURCE for rt, _n in q.image.configs)


def test_create_mirror_configs_and_state_topic() -> None:
    q, _c, mc = _setup()
    assert asyncio.run(mc.create_mirror("m", {**SRC, "sasl.jaas.config": "x"})) == (
        ErrorCode.none,
        None,
    )
    assert dict(q.image.config(MIRROR_RESOURCE, "m")) == {**SRC, "sasl.jaas.config": "x"}
    assert len(q.image.topics["__mirror_state"].partitions) == 3  # created with the first mirror
    code, _ = asyncio.run(mc.create_mirror("m", SRC))
    assert code == M.MIRROR_ALREADY_EXISTS
    for bad in (
        {},
        {"bootstrap.servers": " "},
        {**SRC, "nope": "1"},
        {**SRC, "sasl.x": None},
        {"bootstrap.servers": "nohostport"},
        {**SRC, "security.protocol": "TLS"},
    ):
        code, msg = asyncio.run(mc.create_mirror("n", bad))
        assert code == ErrorCode.invalid_config and msg, bad
    assert not q.image.config(MIRROR_RESOURCE, "n")


def _with_topics(*names: str) -> tuple[MemoryQuorum, Controller, MirrorController]:
    q, c, mc = _setup()
    asyncio.run(mc.create_mirror("m", SRC))
    asyncio.run(mc.create_mirror("other", SRC))
    asyncio.run(c.create_topics([TopicSpec(n, 2) for n in names], False))
    return q, c, mc


def test_add_topics_codes_and_new_topics_with_source_ids() -> None:
    q, _c, mc = _with_topics("a", "b", "c")
    asyncio.run(mc.add_topics("other", ["b"]))
    sid = uuid.uuid4()
    out = asyncio.run(
        mc.add_topics(
            "m",
            ["a", "b", "missing", "__mirror_state", "new", "a"],
            {"new": TopicSpec("new", 5, configs={"retention.ms": "7"}, topic_id=sid)},
        )
    )
    assert out.error == ErrorCode.none
    codes = {r.name: r.error for r in out.topics}
    assert len(out.topics) == 5  # duplicates collapse
    assert codes == {
        "a": ErrorCode.none,
        "b": M.TOPIC_ALREADY_IN_MIRROR,
        "missing": ErrorCode.unknown_topic_or_partition,
        "__mirror_state": ErrorCode.invalid_topic_exception,
        "new": ErrorCode.none,
    }
    assert _mirror_name(q, "a") == "m" and _mirror_name(q, "b") == "other"
    new = q.image.topics["new"]
    assert new.topic_id == sid and len(new.partitions) == 5
    assert dict(q.image.config(TOPIC_RESOURCE, "new")) == {"retention.ms": "7", "mirror.name": "m"}
    again = asyncio.run(mc.add_topics("m", ["a"]))
    assert again.topics[0].error == M.TOPIC_ALREADY_IN_MIRROR
    unknown = asyncio.run(mc.add_topics("nope", ["c"]))
    assert unknown.error == M.UNKNOWN_MIRROR and not unknown.topics
    assert sorted(mirror_topics(q.image, "m")) == ["a", "new"]


def test_add_topics_refuses_a_reused_topic_id() -> None:
    q, _c, mc = _with_topics("a")
    tid = q.image.topics["a"].topic_id
    sid = uuid.uuid4()
    out = asyncio.run(
        mc.add_topics(
            "m",
            ["x", "y", "z"],
            {
                "x": TopicSpec("x", 1, topic_id=tid),
                "y": TopicSpec("y", 1, topic_id=sid),
                "z": TopicSpec("z", 1, topic_id=sid),
            },
        )
    )
    assert [r.error for r in out.topics] == [
        ErrorCode.topic_already_exists,
        ErrorCode.none,
        ErrorCode.topic_already_exists,
    ]
    assert "x" not in q.image.topics and "z" not in q.image.topics


def test_pause_resume_remove_clear_and_delete() -> None:
    q, _c, mc = _with_topics("a", "b", "loose")
    asyncio.run(mc.add_topics("m", ["a", "b"]))

    def codes(out: Any) -> list[Any]:
        return [r.error for r in out.topics]

    assert codes(asyncio.run(mc.resume_topics("m", ["a"]))) == [M.MIRROR_TOPIC_NOT_PAUSED]
    assert codes(asyncio.run(mc.pause_topics("m", ["a"]))) == [ErrorCode.none]
    assert _mirror_name(q, "a") == "m.paused"
    assert codes(asyncio.run(mc.pause_topics("m", ["a"]))) == [M.MIRROR_TOPIC_ALREADY_PAUSED]
    assert codes(asyncio.run(mc.pause_topics("other", ["a"]))) == [M.TOPIC_NOT_IN_MIRROR]
    assert codes(asyncio.run(mc.pause_topics("m", ["loose", "ghost"]))) == [
        M.TOPIC_NOT_IN_MIRROR,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert codes(asyncio.run(mc.resume_topics("m", ["a"]))) == [ErrorCode.none]
    assert _mirror_name(q, "a") == "m"
    assert asyncio.run(mc.remove_topics("ghost-mirror", ["a"])).error == M.UNKNOWN_MIRROR
    asyncio.run(mc.pause_topics("m", ["b"]))
    assert codes(asyncio.run(mc.remove_topics("m", ["a", "b"]))) == [ErrorCode.none] * 2
    assert _mirror_name(q, "a") == "m.removed" and _mirror_name(q, "b") == "m.removed"
    for op in (mc.remove_topics, mc.pause_topics, mc.resume_topics):
        assert codes(asyncio.run(op("m", ["a"]))) == [M.MIRROR_TOPIC_BEING_REMOVED]
    assert asyncio.run(mc.add_topics("other", ["a"])).topics[0].error == M.TOPIC_ALREADY_IN_MIRROR
    code, msg = asyncio.run(mc.delete_mirror("m"))
    assert code == M.MIRROR_NOT_EMPTY and msg and "a" in msg
    # The mirror manager clears mirror.name once a removed topic is STOPPED; only then.
    asyncio.run(mc.add_topics("other", ["loose"]))
    asyncio.run(mc.clear_mirror_name("loose"))
    assert _mirror_name(q, "loose") == "other"
    asyncio.run(mc.clear_mirror_name("a"))
    asyncio.run(mc.clear_mirror_name("b"))
    assert _mirror_name(q, "a") is None
    assert asyncio.run(mc.delete_mirror("m")) == (ErrorCode.none, None)
    assert not q.image.config(MIRROR_RESOURCE, "m")
    assert asyncio.run(mc.delete_mirror("m"))[0] == M.UNKNOWN_MIRROR
    # the name is free again; a stopped topic can join a mirror again
    assert asyncio.run(mc.create_mirror("m", SRC))[0] == ErrorCode.none
    assert codes(asyncio.run(mc.add_topics("m", ["a"]))) == [ErrorCode.none]


def test_a_removed_topic_is_added_back_to_its_own_mirror_only() -> None:
    """The KIP's "restarting a stopped mirror": mirror.name is set again, also while it still
    says ".removed" (a destination of several nodes keeps the suffix after failover)."""
    q, _c, mc = _with_topics("a")
    asyncio.run(mc.add_topics("m", ["a"]))
    asyncio.run(mc.remove_topics("m", ["a"]))
    assert _mirror_name(q, "a") == "m.removed"
    assert asyncio.run(mc.add_topics("other", ["a"])).topics[0].error == M.TOPIC_ALREADY_IN_MIRROR
    assert [r.error for r in asyncio.run(mc.add_topics("m", ["a"])).topics] == [ErrorCode.none]
    assert _mirror_name(q, "a") == "m"


def test_bump_leader_epochs() -> None:
    q, _c, mc = _with_topics("t")
    tid = q.image.topics["t"].topic_id
    assert q.image.topics["t"].partitions[0].leader_epoch == 0
    res = asyncio.run(
        mc.bump_leader_epochs(
            [(tid, 0, 0), (tid, 1, 9), (tid, 1, 4), (tid, 7, 0), (uuid.uuid4(), 0, 0)]
        )
    )
    assert [(r.topic, r.partition, r.error, r.leader_epoch) for r in res] == [
        ("t", 0, ErrorCode.none, 1),
        ("t", 1, ErrorCode.none, 10),
        ("t", 7, ErrorCode.unknown_topic_or_partition, -1),
        ("", 0, ErrorCode.unknown_topic_id, -1),
    ]
    parts = q.image.topics["t"].partitions
    assert (parts[0].leader_epoch, parts[1].leader_epoch) == (1, 10)
    assert parts[0].leader == 1 and parts[1].replicas == (1,)
    assert (parts[0].partition_epoch, parts[1].partition_epoch) == (1, 1)
    before = q.offset
    res = asyncio.run(mc.bump_leader_epochs([(tid, 0, 0), (tid, 1, 9)]))  # a retry: no-op
    assert q.offset == before and [r.leader_epoch for r in res] == [1, 10]
    asyncio.run(mc.bump_leader_epoch("t", 0, 2))  # the manager's form: at least 2
    assert q.image.topics["t"].partitions[0].leader_epoch == 2
    with pytest.raises(KeyError):
        asyncio.run(mc.bump_leader_epoch("ghost", 0, 1))


def test_mirror_name_is_internal_to_the_mirror_apis() -> None:
    q, c, mc = _with_topics("t")
    res = asyncio.run(c.create_topics([TopicSpec("x", configs={"mirror.name": "m"})], False))
    assert res[0].error == ErrorCode.invalid_config and "x" not in q.image.topics
    asyncio.run(mc.add_topics("m", ["t"]))
    for op, value in ((SET, "other"), (DELETE, None)):
        (r,) = asyncio.run(
            c.alter_configs(
                [ConfigChange(TOPIC_RESOURCE, "t", [("mirror.name", op, value)])], False
            )
        )
        assert r.error == ErrorCode.invalid_config
    # legacy AlterConfigs replaces the whole set but must keep the (hidden) mirror.name
    (r,) = asyncio.run(
        c.alter_configs(
            [ConfigChange(TOPIC_RESOURCE, "t", [("retention.ms", SET, "9")], replace_all=True)],
            False,
        )
    )
    assert r.error == ErrorCode.none
    assert dict(q.image.config(TOPIC_RESOURCE, "t")) == {"retention.ms": "9", "mirror.name": "m"}


def test_alter_mirror_configs() -> None:
    q, c, _mc = _with_topics()

    def alter(name: str, *ops: tuple[str, int, str | None]) -> Any:
        (r,) = asyncio.run(c.alter_configs([ConfigChange(MIRROR_RESOURCE, name, list(ops))], False))
        return r

    assert alter("m", ("bootstrap.servers", SET, "h2:1,h3:2")).error == ErrorCode.none
    assert alter("m", ("security.protocol", SET, "SASL_SSL")).error == ErrorCode.none
    assert alter("m", ("security.protocol", DELETE, None)).error == ErrorCode.none
    assert dict(q.image.config(MIRROR_RESOURCE, "m")) == {"bootstrap.servers": "h2:1,h3:2"}
    assert alter("ghost", ("client.id", SET, "x")).error == M.UNKNOWN_MIRROR
    assert alter("m", ("nope", SET, "x")).error == ErrorCode.invalid_config
    assert alter("m", ("bootstrap.servers", DELETE, None)).error == ErrorCode.invalid_config
    assert alter("m", ("request.timeout.ms", SET, "soon")).error == ErrorCode.invalid_config
    assert dict(q.image.config(MIRROR_RESOURCE, "m")) == {"bootstrap.servers": "h2:1,h3:2"}


def test_sanitize_source_topic_configs() -> None:
    _q, c, mc = _with_topics()
    asyncio.run(
        c.alter_configs(
            [
                ConfigChange(
                    MIRROR_RESOURCE,
                    "m",
                    [("mirror.topic.properties.exclude", SET, "cleanup.policy")],
                )
            ],
            False,
        )
    )
    src = {
        "retention.ms": "5",
        "cleanup.policy": "compact",
        "mirror.name": "x",
        "unknown.key": "1",
        "min.insync.replicas": "2",
    }
    assert mc.sanitize_topic_configs("m", src) == {"retention.ms": "5", "min.insync.replicas": "2"}
    # the default exclude list drops min.insync.replicas
    assert mc.sanitize_topic_configs("other", src) == {
        "retention.ms": "5",
        "cleanup.policy": "compact",
    }


def test_mirror_config_describe_masks_secrets() -> None:
    rows = {
        r["name"]: r
        for r in mirror_config.describe_rows(
            {**SRC, "ssl.key.password": "pw", "sasl.jaas.config": "j"}
        )
    }
    assert rows["ssl.key.password"]["sensitive"] and rows["sasl.jaas.config"]["sensitive"]
    assert not rows["bootstrap.servers"]["sensitive"]
    assert (
        rows["mirror.groups.include"]["value"] == ".*"
        and rows["mirror.groups.include"]["source"] == 5
    )
    assert all(s["value"] is None for s in rows["sasl.jaas.config"]["synonyms"])


def test_topic_patterns() -> None:
    assert not is_topic_pattern("my-topic") and not is_topic_pattern("a.b_c")
    assert is_topic_pattern(".*") and is_topic_pattern("test-.*") and is_topic_pattern("a|b")


# -- AddTopicsToMirror handler with a fake source --------------------------------------------


@dataclass
class FakeTopic:
    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, Any] = field(default_factory=dict)
    is_internal: bool = False


class FakeSource:
    def __init__(
        self, topics: Mapping[str, FakeTopic], configs: Mapping[str, dict[str, str]]
    ) -> None:
        self._topics = topics
        self._configs = configs
        self.closed = False

    async def topics(self, names: Sequence[str] | None = None) -> dict[str, FakeTopic]:
        return {n: t for n, t in self._topics.items() if names is None or n in names}

    async def topic_configs(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        return {n: self._configs.get(n, {}) for n in names}

    async def cluster_id(self) -> str | None:
        return "src-cluster"

    async def close(self) -> None:
        self.closed = True


class _Ctx:
    api_version = 0


def _services(q: Any, c: Any, authorizer: Any = None) -> Services:
    """The handlers' services over the controller ``c`` and the image ``q`` follows (checking
    ACLs with ``authorizer``, when given)."""
    return Services(
        node_id=1,
        cluster_id="c",
        image=lambda: q.image,
        controller=c,
        replicas=None,
        log_manager=None,
        config=None,
        now_ms=lambda: 0,
        authorizer=authorizer,
    )


def _add(api: MirrorApi, mirror: str, *names: str) -> Any:
    cls: Any = REGISTRY.spec(95).request_type(0)
    req = cls(
        mirror_name=mirror, topics=tuple(TopicData(topic_id=None, topic_name=n) for n in names)
    )
    return asyncio.run(api.add_topics(_Ctx(), req))  # type: ignore[arg-type]


def test_add_topics_handler_creates_from_source() -> None:
    q, c, mc = _with_topics("local", "clash")
    ids = {n: uuid.uuid4() for n in ("foo", "bar", "clash")}
    src = FakeSource(
        {
            "foo": FakeTopic("foo", ids["foo"], {0: None, 1: None, 2: None}),
            "bar": FakeTopic("bar", ids["bar"], {0: None}),
            "clash": FakeTopic("clash", ids["clash"], {0: None}),
            "__consumer_offsets": FakeTopic("__consumer_offsets", uuid.uuid4(), {0: None}, True),
        },
        {"foo": {"retention.ms": "77", "mirror.name": "evil"}},
    )
    api = MirrorApi(_services(q, c), mc, source_client=lambda cfg, cid: src)
    resp = _add(api, "m", "f.*|b.*")
    assert [(t.name, int(t.error_code)) for t in resp.topics] == [("bar", 0), ("foo", 0)]
    assert src.closed
    foo = q.image.topics["foo"]
    assert foo.topic_id == ids["foo"] and len(foo.partitions) == 3
    # the origin chain (loop prevention) names the source cluster
    assert dict(q.image.config(TOPIC_RESOURCE, "foo")) == {
        "retention.ms": "77",
        "mirror.name": "m",
        "mirror.source.cluster.ids": "src-cluster",
    }
    resp = _add(api, "m", "clash", "local", "nowhere")
    assert [(t.name, int(t.error_code)) for t in resp.topics] == [
        ("clash", ErrorCode.inconsistent_topic_id.value),
        ("local", 0),  # exists here, unknown at the source: allowed (e.g. failback)
        ("nowhere", ErrorCode.unknown_topic_or_partition.value),
    ]
    assert "clash" in (resp.error_message or "")
    # a pattern matching nothing yet is kept for topics the source creates later
    resp = _add(api, "m", "zzz.*")
    assert int(resp.error_code) == 0 and not resp.topics
    assert mirror_patterns.include_patterns(q.image.config(MIRROR_RESOURCE, "m")) == [
        "f.*|b.*",
        "zzz.*",
    ]
    resp = _add(api, "m", "(")
    assert int(resp.error_code) == ErrorCode.invalid_regular_expression.value
    resp = _add(api, "ghost", "foo")
    assert int(resp.error_code) == M.UNKNOWN_MIRROR
    assert api.cluster_id_of("m") == "src-cluster"
    # a partition the coordinator still tracks as MIRRORING blocks a re-add (KIP precondition)
    asyncio.run(c.create_topics([TopicSpec("again", 1)], False))
    api.states = lambda m: {("again", 0): ("MIRRORING", 3)}
    resp = _add(api, "m", "again")
    assert int(resp.topics[0].error_code) == ErrorCode.invalid_request.value


def test_describe_configs_for_a_mirror_hides_secrets() -> None:
    from broker.api.configs import ConfigsApi
    from protocol.build import build

    q, c, _mc = _with_topics()
    asyncio.run(
        c.alter_configs(
            [ConfigChange(MIRROR_RESOURCE, "m", [("sasl.jaas.config", SET, "secret!")])], False
        )
    )
    api = ConfigsApi(_services(q, c))

    class Ctx:
        api_version = 5

    req = build(
        REGISTRY.spec(32).request_type(5),
        {
            "resources": [
                {"resource_type": 64, "resource_name": "m", "configuration_keys": None},
                {"resource_type": 64, "resource_name": "ghost", "configuration_keys": None},
            ],
            "include_synonyms": True,
        },
    )
    resp = asyncio.run(api.describe_configs(Ctx(), req))  # type: ignore[arg-type]
    found, ghost = resp.results
    values = {str(x.name): (x.value, x.is_sensitive) for x in found.configs}
    assert values["sasl.jaas.config"] == (None, True)
    assert values["bootstrap.servers"] == ("src:9092", False)
    assert int(ghost.error_code) == M.UNKNOWN_MIRROR


def test_create_mirror_fails_when_the_state_topic_cannot_exist() -> None:
    q, c, _ = _setup()
    mc = MirrorController(c, state_topic_partitions=3, state_topic_replication_factor=3)
    code, why = asyncio.run(mc.create_mirror("m", {"bootstrap.servers": "src:9092"}))
    assert code == ErrorCode.invalid_replication_factor
    assert why is not None and "__mirror_state" in why and "mirror.topic.replication.factor" in why
    assert not q.image.config(64, "m")  # nothing committed


def test_add_topics_with_prefix_maps_names_and_refuses_bad_ones() -> None:
    """mirror.topic.prefix: source names in, prefixed names made (same topic ids, origin chain);
    a loop, an over-long name, two names colliding and an existing non-mirror topic are refused
    naming the mirror and the topic; the prefix cannot be altered afterwards."""
    q, c, mc = _setup()
    cfg = {**SRC, "mirror.topic.prefix": "east.", "mirror.group.prefix.enable": "true"}
    assert asyncio.run(mc.create_mirror("pm", cfg)) == (ErrorCode.none, None)
    asyncio.run(c.create_topics([TopicSpec("east.mine", 1)], False))
    long = "l" * 245
    names = ("orders", "a.b", "a_b", "mine", long, "west.orders")
    ids = {n: uuid.uuid4() for n in names}
    src = FakeSource(
        {n: FakeTopic(n, ids[n], {0: None}) for n in names},
        {"west.orders": {"mirror.source.cluster.ids": "x,c"}},  # "c": this cluster
    )
    api = MirrorApi(_services(q, c), mc, source_client=lambda cfg, cid: src)
    # a pattern passes over the loop silently
    resp = _add(api, "pm", "ord.*|west.*")
    assert [(t.name, int(t.error_code)) for t in resp.topics] == [("east.orders", 0)]
    made = q.image.topics["east.orders"]
    assert made.topic_id == ids["orders"]
    assert q.image.config(TOPIC_RESOURCE, "east.orders")["mirror.source.cluster.ids"] == (
        "src-cluster"
    )
    assert "orders" not in q.image.topics
    resp = _add(api, "pm", "west.orders", "a.b", "a_b", "mine", long)
    got = {t.name: int(t.error_code) for t in resp.topics}
    messages = (resp.error_message or "").split("; ")  # one per refused topic
    for name, needle in (
        ("east.west.orders", "itself a mirror of this cluster"),
        ("east.a.b", "under one name"),
        ("east.a_b", "under one name"),
        ("east.mine", "is not a mirror topic"),
        ("east." + long, "longer than 249"),
    ):
        source = name.removeprefix("east.")
        said = [m for m in messages if needle in m and source in m]
        assert got[name] != 0 and said and "pm" in said[0], (name, messages)
    assert "east.west.orders" not in q.image.topics
    # fixed at creation
    out = asyncio.run(
        c.alter_configs(
            [ConfigChange(MIRROR_RESOURCE, "pm", [("mirror.topic.prefix", 0, "x.")])], False
        )
    )
    assert out[0].error == ErrorCode.invalid_config and "pm" in (out[0].message or "")
    out = asyncio.run(
        c.alter_configs(
            [ConfigChange(MIRROR_RESOURCE, "pm", [("mirror.group.prefix.enable", 1, None)])],
            False,
        )
    )
    assert out[0].error == ErrorCode.invalid_config
    # and the origin chain is not a client's to set
    out = asyncio.run(
        c.alter_configs(
            [ConfigChange(TOPIC_RESOURCE, "east.orders", [("mirror.source.cluster.ids", 0, "")])],
            False,
        )
    )
    assert out[0].error == ErrorCode.invalid_config
