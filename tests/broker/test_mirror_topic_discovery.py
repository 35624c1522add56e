"""Persistent ``--add`` patterns: what the controller stores with the mirror, and which new source
topics a metadata refresh creates from them (over an in-memory one-voter quorum)."""

import asyncio
import json
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from broker.controller import mirror_config, mirror_patterns
from broker.controller.controller import DELETE, SET, ConfigChange
from broker.controller.mirrors import mirror_topics
from broker.metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE
from broker.mirror import topic_discovery

from .test_mirror_controller import FakeSource, FakeTopic, _with_topics

T = TypeVar("T")


async def _direct(work: Awaitable[T]) -> T:
    return await work


def _stored(q: Any) -> tuple[list[str], set[str]]:
    cfg = q.image.config(MIRROR_RESOURCE, "m")
    return mirror_patterns.include_patterns(cfg), mirror_patterns.removed_topics(cfg)


def test_patterns_and_removed_topics_are_kept_with_the_mirror() -> None:
    q, _c, mc = _with_topics("events.a", "events.b")
    out = asyncio.run(mc.add_topics("m", ["events.a", "events.b"], patterns=[r"events\..*"]))
    assert [r.error for r in out.topics] == [ErrorCode.none, ErrorCode.none]
    assert _stored(q) == ([r"events\..*"], set())
    asyncio.run(mc.add_topics("m", [], patterns=[r"events\..*", "x|y"]))  # no duplicates
    assert _stored(q) == ([r"events\..*", "x|y"], set())
    # a removed topic is remembered; removing with a stored pattern's text drops the pattern
    asyncio.run(mc.remove_topics("m", ["events.a"], ["x|y"]))
    assert _stored(q) == ([r"events\..*"], {"events.a"})
    # a failed removal remembers nothing
    asyncio.run(mc.remove_topics("m", ["events.a", "nope"]))
    assert _stored(q)[1] == {"events.a"}
    # the values are JSON lists (regexes may hold commas)
    raw = q.image.config(MIRROR_RESOURCE, "m")[mirror_patterns.INCLUDE_KEY]
    assert json.loads(raw) == [r"events\..*"]


def test_explicit_add_forgets_a_removal_and_pattern_adds_refuse_it() -> None:
    q, _c, mc = _with_topics("t")
    asyncio.run(mc.add_topics("m", ["t"]))
    asyncio.run(mc.remove_topics("m", ["t"]))
    asyncio.run(mc.clear_mirror_name("t"))  # what the state driver does once STOPPED
    assert _stored(q)[1] == {"t"}
    # discovery (create_only) never takes a local or removed topic
    out = asyncio.run(mc.add_topics("m", ["t"], create_only=True))
    assert out.topics[0].error == ErrorCode.topic_already_exists
    assert "t" not in mirror_topics(q.image, "m")
    out = asyncio.run(mc.add_topics("m", ["t"]))
    assert out.topics[0].error == ErrorCode.none
    assert _stored(q)[1] == set()


def test_internal_keys_are_hidden_and_not_alterable() -> None:
    q, c, mc = _with_topics()
    asyncio.run(mc.add_topics("m", [], patterns=["a.*"]))
    cfg = q.image.config(MIRROR_RESOURCE, "m")
    assert mirror_patterns.INCLUDE_KEY in cfg
    assert mirror_config.client_settings(cfg) == {"bootstrap.servers": "src:9092"}
    assert all(not r["name"].startswith("internal.") for r in mirror_config.describe_rows(cfg))

    def alter(*ops: tuple[str, int, str | None], replace: bool = False) -> Any:
        ch = ConfigChange(MIRROR_RESOURCE, "m", list(ops), replace_all=replace)
        (r,) = asyncio.run(c.alter_configs([ch], False))
        return r

    for op in (SET, DELETE):
        r = alter((mirror_patterns.INCLUDE_KEY, op, "[]"))
        assert r.error == ErrorCode.invalid_config and "internal" in r.message
    assert alter(("bootstrap.servers", SET, "h:1"), replace=True).error == ErrorCode.none
    assert _stored(q)[0] == ["a.*"]  # AlterConfigs (replace all) keeps the bookkeeping
    code, _ = asyncio.run(mc.create_mirror("n", {"bootstrap.servers": "h:1", "internal.x": "1"}))
    assert code == ErrorCode.invalid_config


def test_unreadable_bookkeeping_is_ignored() -> None:
    cfg = {mirror_patterns.INCLUDE_KEY: "not json", mirror_patterns.REMOVED_KEY: '{"a": 1}'}
    assert mirror_patterns.include_patterns(cfg) == []
    assert mirror_patterns.removed_topics(cfg) == set()
    assert [p.pattern for p in mirror_patterns.compiled(["(", "ok.*"])] == ["ok.*"]


def _source(ids: dict[str, uuid.UUID]) -> FakeSource:
    return FakeSource(
        {
            "events.new": FakeTopic("events.new", ids["events.new"], {0: None, 1: None, 2: None}),
            "events.old": FakeTopic("events.old", uuid.uuid4(), {0: None}),
            "events.gone": FakeTopic("events.gone", uuid.uuid4(), {0: None}),
            "events.local": FakeTopic("events.local", uuid.uuid4(), {0: None}),
            "other": FakeTopic("other", uuid.uuid4(), {0: None}),
            "__events.x": FakeTopic("__events.x", uuid.uuid4(), {0: None}),
            "events.internal": FakeTopic("events.internal", uuid.uuid4(), {0: None}, True),
        },
        {"events.new": {"retention.ms": "99", "min.insync.replicas": "2"}},
    )


def test_discovery_creates_only_new_matching_source_topics() -> None:
    q, c, mc = _with_topics("events.old", "events.local")
    ids = {"events.new": uuid.uuid4()}
    src = _source(ids)
    asyncio.run(mc.add_topics("m", ["events.old"], patterns=[r"__.*|events\..*"]))
    asyncio.run(mc.remove_topics("m", ["events.old"]))
    # events.gone: removed from the mirror earlier (its local topic since deleted)
    cfg = q.image.config(MIRROR_RESOURCE, "m")
    asyncio.run(c.commit(mirror_patterns.selection_records("m", cfg, removed=["events.gone"])))
    found = asyncio.run(
        topic_discovery.discover("m", q.image, src, mc, can_describe_configs=True, call=_direct)
    )
    assert found.added == ["events.new"] and not found.failed
    t = q.image.topics["events.new"]
    assert t.topic_id == ids["events.new"] and len(t.partitions) == 3
    # source configs minus the exclude list (min.insync.replicas is on the default list)
    assert dict(q.image.config(TOPIC_RESOURCE, "events.new")) == {
        "retention.ms": "99",
        "mirror.name": "m",
    }
    for name in ("other", "__events.x", "events.internal", "events.gone"):
        assert name not in q.image.topics
    assert "events.local" not in mirror_topics(q.image, "m")  # a local topic is never taken
    # the next refresh finds nothing new
    again = asyncio.run(
        topic_discovery.discover("m", q.image, src, mc, can_describe_configs=True, call=_direct)
    )
    assert not again.added and not again.failed


def test_discovery_without_patterns_or_describe_configs() -> None:
    q, _c, mc = _with_topics()
    src = _source({"events.new": uuid.uuid4()})
    none = asyncio.run(
        topic_discovery.discover("m", q.image, src, mc, can_describe_configs=True, call=_direct)
    )
    assert not none.added and "events.new" not in q.image.topics
    asyncio.run(mc.add_topics("m", [], patterns=["events.n.*"]))
    found = asyncio.run(
        topic_discovery.discover("m", q.image, src, mc, can_describe_configs=False, call=_direct)
    )
    assert found.added == ["events.new"] and found.configs_skipped
    assert dict(q.image.config(TOPIC_RESOURCE, "events.new")) == {"mirror.name": "m"}
