"""Metadata snapshots of the image (broker.metadata.snapshot): the records a snapshot holds
rebuild the image exactly, secrets stay encoded, and the digest depends on content only."""

from __future__ import annotations

import random
import sys
import uuid
from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from broker.metadata.image import (
    BROKER_RESOURCE,
    MIRROR_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    apply_records,
)
from broker.metadata.snapshot import (
    decode_snapshot,
    encode_snapshot,
    image_digest,
    image_info,
    image_records,
    snapshot_delta,
)
from broker.metrics.broker_metrics import BrokerMetrics
from protocol.errors import DecodeError
from protocol.metadata_records import latest_type

R = {
    n: latest_type(n)
    for n in (
        "FeatureLevelRecord",
        "RegisterBrokerRecord",
        "BrokerRegistrationChangeRecord",
        "FenceBrokerRecord",
        "UnfenceBrokerRecord",
        "UnregisterBrokerRecord",
        "TopicRecord",
        "PartitionRecord",
        "PartitionChangeRecord",
        "RemoveTopicRecord",
        "ConfigRecord",
        "ClientQuotaRecord",
        "ProducerIdsRecord",
        "AccessControlEntryRecord",
        "RemoveAccessControlEntryRecord",
        "UserScramCredentialRecord",
        "RemoveUserScramCredentialRecord",
        "NoOpRecord",
    )
}
Endpoint = sys.modules[R["RegisterBrokerRecord"].__module__].BrokerEndpoint

SECRET = "hunter2-very-secret"


def open_value(rtype: int, name: str, key: str, stored: str) -> str | None:
    """A stand-in for ConfigSecrets.open: ``enc:`` values decode, ``bad:`` ones cannot."""
    if stored.startswith("enc:"):
        return stored[4:][::-1]
    if stored.startswith("bad:"):
        return None
    return stored


class Gen:
    """Random but valid-looking metadata record sequences, as a controller would write them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.quota_rng = random.Random(rng.getstate()[1][1])
        self.brokers: dict[int, int] = {}  # id -> epoch
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}  # name -> (id, partitions)
        self.acls: list[uuid.UUID] = []
        self.scram: list[tuple[str, int]] = []
        self.epoch = 0

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128))

    def replicas(self) -> tuple[int, ...]:
        ids = sorted(self.brokers) or [1, 2, 3]
        return tuple(self.rng.sample(ids, self.rng.randint(1, len(ids))))

    def record(self) -> Any:
        r = self.rng
        kind = r.choice(
            ["feature", "register", "change", "fence", "unfence", "unregister", "topic",
             "pchange", "remove_topic", "config", "config", "pid", "acl", "remove_acl",
             "scram", "remove_scram", "noop"]
        )  # fmt: skip
        if kind == "feature":
            name = r.choice(["metadata.version", "kraft.version", "transaction.version"])
            return R["FeatureLevelRecord"](name=name, feature_level=r.randint(0, 27))
        if kind == "register" or (not self.brokers and kind in ("change", "fence", "unfence")):
            bid = r.randint(1, 5)
            self.epoch += r.randint(1, 50)
            self.brokers[bid] = self.epoch
            return R["RegisterBrokerRecord"](
                broker_id=bid,
                incarnation_id=self.uuid() if r.random() < 0.9 else None,
                broker_epoch=self.epoch,
                end_points=tuple(
                    Endpoint(name=n, host=f"h{bid}", port=9000 + bid + i, security_protocol=i)
                    for i, n in enumerate(r.sample(["PLAINTEXT", "SSL", "CONTROLLER"], r.randint(1, 3)))
                ),
                features=(),
                rack=r.choice([None, "a", "b"]),
                fenced=r.random() < 0.5,
                in_controlled_shutdown=r.random() < 0.2,
            )  # fmt: skip
        if kind in ("change", "fence", "unfence", "unregister") and self.brokers:
            bid = r.choice(sorted(self.brokers))
            epoch = self.brokers[bid] if r.random() < 0.9 else self.brokers[bid] - 1
            if kind == "change":
                return R["BrokerRegistrationChangeRecord"](
                    broker_id=bid,
                    broker_epoch=epoch,
                    fenced=r.choice([-1, 0, 1]),
                    in_controlled_shutdown=r.choice([0, 1]),
                )
            if kind == "fence":
                return R["FenceBrokerRecord"](id=bid, epoch=epoch)
            if kind == "unfence":
                return R["UnfenceBrokerRecord"](id=bid, epoch=epoch)
            del self.brokers[bid]
            return R["UnregisterBrokerRecord"](broker_id=bid, broker_epoch=epoch)
        if kind == "topic" or (not self.topics and kind in ("pchange", "remove_topic")):
            return self._topic()
        if kind == "pchange" and self.topics:
            name = r.choice(sorted(self.topics))
            tid, n = self.topics[name]
            reps = self.replicas()
            return R[
                "PartitionChangeRecord"
            ](
                partition_id=r.randrange(n + 1),  # sometimes one the topic lacks
                topic_id=tid if r.random() < 0.95 else self.uuid(),
                isr=r.choice([None, reps[: r.randint(1, len(reps))]]),
                leader=r.choice([-2, -1, reps[0]]),
                replicas=r.choice([None, reps]),
            )
        if kind == "remove_topic" and self.topics:
            name = r.choice(sorted(self.topics))
            tid, _ = self.topics.pop(name)
            return R["RemoveTopicRecord"](topic_id=tid)
        if kind == "config":
            rtype = r.choice([TOPIC_RESOURCE, BROKER_RESOURCE, MIRROR_RESOURCE])
            if rtype == TOPIC_RESOURCE:
                rname = r.choice(sorted(self.topics) or ["gone"])
            elif rtype == BROKER_RESOURCE:
                rname = r.choice(["", "1", "2"])
            else:
                rname = r.choice(["dr", "backup"])
            key = r.choice(
                ["retention.ms", "cleanup.policy", "sasl.jaas.config", "ssl.key.password"]
            )
            value = r.choice(
                [None, str(r.randint(0, 10**6)), "enc:" + SECRET[::-1], "enc:xyz", "bad:blob", ""]
            )  # fmt: skip
            return R["ConfigRecord"](
                resource_type=rtype, resource_name=rname, name=key, value=value
            )
        if kind == "pid":
            return R["ProducerIdsRecord"](
                broker_id=r.randint(1, 3), broker_epoch=self.epoch, next_producer_id=r.randint(0, 10**9)
            )  # fmt: skip
        if kind == "acl" or (kind == "remove_acl" and not self.acls):
            aid = self.uuid()
            self.acls.append(aid)
            return R["AccessControlEntryRecord"](
                id=aid,
                resource_type=r.randint(2, 5),
                resource_name=r.choice(["t", "*", "group-1"]),
                pattern_type=r.choice([3, 4]),
                principal=r.choice(["User:alice", "User:bob"]),
                host=r.choice(["*", "10.0.0.1"]),
                operation=r.randint(2, 12),
                permission_type=r.choice([2, 3]),
            )
        if kind == "remove_acl":
            aid = self.acls.pop(r.randrange(len(self.acls)))
            return R["RemoveAccessControlEntryRecord"](id=aid)
        if kind == "scram" or (kind == "remove_scram" and not self.scram):
            key2 = (r.choice(["alice", "bob", "carol"]), r.choice([1, 2]))
            self.scram.append(key2)
            return R["UserScramCredentialRecord"](
                name=key2[0],
                mechanism=key2[1],
                salt=r.randbytes(16),
                stored_key=r.randbytes(32),
                server_key=r.randbytes(32),
                iterations=r.randint(4096, 10000),
            )
        if kind == "noop" and self.quota_rng.random() < 0.8:
            # client quotas come instead of most no-ops, from a stream of their own, so the
            # sequences other tests rely on stay as they were
            r = self.quota_rng
            entity = r.choice(
                [(("user", "alice"),), (("user", None),), (("client-id", "c"), ("user", None)),
                 (("client-id", None),), (("ip", "10.0.0.1"),)]
            )  # fmt: skip
            Part = sys.modules[R["ClientQuotaRecord"].__module__].EntityData
            return R["ClientQuotaRecord"](
                entity=tuple(Part(entity_type=t, entity_name=n) for t, n in entity),
                key=r.choice(["producer_byte_rate", "consumer_byte_rate"]),
                value=float(r.randint(1, 10**6)),
                remove=r.random() < 0.3,
            )
        if kind == "remove_scram":
            user, mech = self.scram.pop(r.randrange(len(self.scram)))
            return R["RemoveUserScramCredentialRecord"](name=user, mechanism=mech)
        return R["NoOpRecord"]()

    def _topic(self) -> Any:
        name = f"t{self.rng.randint(0, 30)}"
        if name in self.topics:
            return R["RemoveTopicRecord"](topic_id=self.topics.pop(name)[0])
        tid = self.uuid()
        n = self.rng.randint(1, 4)
        self.topics[name] = (tid, n)
        return R["TopicRecord"](name=name, topic_id=tid)

    def partitions_of_new_topic(self, record: Any) -> list[Any]:
        _, n = self.topics[record.name]
        out = []
        for p in range(n):
            reps = self.replicas()
            out.append(
                R["PartitionRecord"](
                    partition_id=p,
                    topic_id=record.topic_id,
                    replicas=reps,
                    isr=reps,
                    leader=reps[0],
                    leader_epoch=self.rng.randint(0, 5),
                    partition_epoch=self.rng.randint(0, 5),
                )
            )
        return out

    def sequence(self, n: int) -> list[tuple[int, Any]]:
        out: list[tuple[int, Any]] = []
        offset = self.rng.randint(0, 100)
        while len(out) < n:
            rec = self.record()
            batch = [rec]
            if type(rec).__name__ == "TopicRecord":
                batch += self.partitions_of_new_topic(rec)
            for r in batch:
                out.append((offset, r))
                offset += self.rng.randint(1, 3)  # control records and gaps in between
        return out


def random_image(seed: int, n: int = 80) -> MetadataImage:
    records = Gen(random.Random(seed)).sequence(n)
    image, _ = apply_records(MetadataImage(), records, open_value)
    return image


def rebuilt(image: MetadataImage) -> MetadataImage:
    """The image a node loading this image's snapshot gets (through the snapshot's bytes)."""
    entries = decode_snapshot(encode_snapshot(image_records(image)))
    out, _ = apply_records(MetadataImage(), entries, open_value)
    return out


def assert_same(a: MetadataImage, b: MetadataImage) -> None:
    for f in fields(MetadataImage):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name in ("topics", "brokers", "configs", "unreadable_configs", "encoded_configs"):
            x, y = dict(x), dict(y)
            assert x.keys() == y.keys(), f.name
            for k in x:
                assert x[k] == y[k], (f.name, k)
        assert x == y, f.name
    assert a == b


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=200))
def test_snapshot_records_rebuild_the_image(seed: int, n: int) -> None:
    image = random_image(seed, n)
    assert_same(rebuilt(image), image)
    assert image_digest(rebuilt(image)) == image_digest(image)


def test_round_trip_covers_every_part_of_the_image() -> None:
    """The generator reaches every field the round trip must carry (a test that could not fail
    on an empty part would prove nothing about it)."""
    seen: set[str] = set()
    for seed in range(40):
        img = random_image(seed, 150)
        assert_same(rebuilt(img), img)
        seen |= {f.name for f in fields(MetadataImage) if getattr(img, f.name)}
        for b in img.brokers.values():
            if b.in_controlled_shutdown:
                seen.add("in_controlled_shutdown")
            if b.fenced:
                seen.add("fenced")
            if b.registered_offset > 0:
                seen.add("registered_offset")
        for t in img.topics.values():
            if any(p.leader_epoch > 5 for p in t.partitions.values()):
                seen.add("changed leader epoch")
    assert seen >= {f.name for f in fields(MetadataImage)} | {
        "in_controlled_shutdown",
        "fenced",
        "registered_offset",
        "changed leader epoch",
    }


def test_broker_registration_offset_and_epoch_survive() -> None:
    records = Gen(random.Random(7)).sequence(60)
    image, _ = apply_records(MetadataImage(), records, open_value)
    assert image.brokers
    back = rebuilt(image)
    for bid, b in image.brokers.items():
        assert (back.brokers[bid].registered_offset, back.brokers[bid].epoch) == (
            b.registered_offset,
            b.epoch,
        )
        assert b.registered_offset < image.offset


def test_the_snapshot_holds_secrets_encoded_never_decoded() -> None:
    cfg = R["ConfigRecord"]
    records = [
        (0, cfg(resource_type=MIRROR_RESOURCE, resource_name="dr", name="sasl.jaas.config",
                value="enc:" + SECRET[::-1])),
        (1, cfg(resource_type=MIRROR_RESOURCE, resource_name="dr", name="ssl.key.password",
                value="bad:opaque")),
        (2, cfg(resource_type=MIRROR_RESOURCE, resource_name="dr", name="bootstrap.servers",
                value="src:9092")),
    ]  # fmt: skip
    image, _ = apply_records(MetadataImage(), records, open_value)
    assert image.config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"] == SECRET  # decoded in memory
    data = encode_snapshot(image_records(image))
    assert SECRET.encode() not in data
    assert ("enc:" + SECRET[::-1]).encode() in data and b"bad:opaque" in data
    stored = {
        r.name: r.value for _, r in image_records(image) if type(r).__name__ == "ConfigRecord"
    }
    assert stored == {
        "sasl.jaas.config": "enc:" + SECRET[::-1],
        "ssl.key.password": "bad:opaque",
        "bootstrap.servers": "src:9092",
    }
    # a node that can decode nothing rebuilds the same stored values, and the same digest
    blind, _ = apply_records(MetadataImage(), records, lambda *a: None)
    assert image_digest(blind) == image_digest(image)
    # re-setting the value in plain text forgets the encoded form
    plain, _ = apply_records(
        image,
        [(3, cfg(resource_type=MIRROR_RESOURCE, resource_name="dr", name="sasl.jaas.config",
                 value="plain"))],
        open_value,
    )  # fmt: skip
    assert "sasl.jaas.config" not in plain.encoded_configs.get((MIRROR_RESOURCE, "dr"), {})
    assert_same(rebuilt(plain), plain)


def test_digest_ignores_order_and_offset_but_not_content() -> None:
    gen = Gen(random.Random(3))
    records = gen.sequence(120)
    image, _ = apply_records(MetadataImage(), records, open_value)
    # the same content reached at other offsets, and with every dict built in reverse order
    shifted, _ = apply_records(MetadataImage(), [(o + 1000, r) for o, r in records], open_value)
    shifted = replace(
        shifted,
        brokers={k: replace(v, registered_offset=image.brokers[k].registered_offset)
                 for k, v in reversed(list(shifted.brokers.items()))},
        topics=dict(reversed(list(shifted.topics.items()))),
        configs={k: dict(reversed(list(v.items()))) for k, v in reversed(list(shifted.configs.items()))},
        acls=dict(reversed(list(shifted.acls.items()))),
    )  # fmt: skip
    assert shifted.offset != image.offset
    assert image_digest(shifted) == image_digest(image)
    # one change anywhere changes it
    t = next(iter(image.topics.values()))
    p = next(iter(t.partitions.values()))
    bumped = replace(
        image,
        topics={
            **image.topics,
            t.name: replace(
                t, partitions={**t.partitions, p.partition: replace(p, leader_epoch=p.leader_epoch + 1)}
            ),
        },
    )  # fmt: skip
    assert image_digest(bumped) != image_digest(image)
    b = next(iter(image.brokers.values()))
    moved = replace(
        image,
        brokers={**image.brokers, b.broker_id: replace(b, registered_offset=b.registered_offset + 1)},
    )  # fmt: skip
    assert image_digest(moved) != image_digest(image)
    assert image_digest(
        replace(image, next_producer_id=image.next_producer_id + 1)
    ) != image_digest(image)


def test_digest_is_pinned() -> None:
    """The digest is compared across nodes and versions: a change to it must be deliberate."""
    tid = uuid.UUID(int=0x1234)
    records = [
        (0, R["FeatureLevelRecord"](name="metadata.version", feature_level=27)),
        (1, R["RegisterBrokerRecord"](
            broker_id=1, incarnation_id=uuid.UUID(int=9), broker_epoch=1,
            end_points=(Endpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0),),
            features=(), rack=None, fenced=False)),
        (2, R["TopicRecord"](name="orders", topic_id=tid)),
        (3, R["PartitionRecord"](partition_id=0, topic_id=tid, replicas=(1,), isr=(1,), leader=1,
                                 leader_epoch=0, partition_epoch=0)),
        (4, R["ConfigRecord"](resource_type=TOPIC_RESOURCE, resource_name="orders",
                              name="retention.ms", value="1000")),
    ]  # fmt: skip
    image, _ = apply_records(MetadataImage(), records)
    assert image_digest(image) == PINNED


PINNED = "3cfe835aea2fb5f18304aef2e16ff9e9e40b074eb3098a6729df1992c42d7df7"


def test_a_damaged_snapshot_is_refused() -> None:
    data = encode_snapshot(image_records(random_image(1)))
    with pytest.raises(DecodeError):
        decode_snapshot(data[:-3])
    with pytest.raises(DecodeError):
        decode_snapshot(b"\x00\x07" + data[2:])
    assert decode_snapshot(encode_snapshot([])) == []


def test_snapshot_delta_says_what_a_replaced_image_changed() -> None:
    old = random_image(11, 150)
    new = random_image(12, 150)
    d = snapshot_delta(old, new)
    gone = {t.name for t in d.deleted_topics}
    for name, t in old.topics.items():
        n = new.topics.get(name)
        assert (name in gone) == (n is None or n.topic_id != t.topic_id)
    for name, t in new.topics.items():
        for p in t.partitions:
            o = old.topics.get(name)
            if o is None or o.topic_id != t.topic_id or o.partitions.get(p) != t.partitions[p]:
                assert (name, p) in d.changed_partitions
    assert d.brokers_changed == (dict(old.brokers) != dict(new.brokers))
    same = snapshot_delta(old, rebuilt(old))
    assert same.is_empty()
    fresh = snapshot_delta(MetadataImage(), old)
    assert sorted(fresh.created_topics) == sorted(old.topics)


def test_image_info_metric() -> None:
    image = random_image(5)
    metrics = BrokerMetrics()
    metrics.watch_image(lambda: image_info(image))
    text = generate_latest(metrics.registry).decode()
    assert f'kmirror_metadata_image_info{{digest="{image_digest(image)}"}} 1.0' in text
    assert f"kmirror_metadata_image_offset {float(image.offset)}" in text
    quiet = BrokerMetrics()
    quiet.watch_image(lambda: None)  # not readable now: left out, the rest is served
    assert "kmirror_metadata_image_info{" not in generate_latest(quiet.registry).decode()
