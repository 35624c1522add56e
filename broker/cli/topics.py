"""``kafka-topics.sh``: create, list, describe, alter (partitions) and delete topics, with Apache
Kafka 4.1's flags, output and exit codes (TopicCommand).

``--topic`` is a regular expression (commas for alternatives, quotes stripped) everywhere but
``--create``; an exact name that matches nothing fails unless ``--if-exists``. ``--describe``
prints a topic line (the configs whose source is not the default) and a line per partition;
``--under-replicated-partitions``, ``--under-min-isr-partitions``, ``--at-min-isr-partitions``
and ``--unavailable-partitions`` keep only such partitions (and drop the topic lines),
``--topics-with-overrides`` keeps only the topic lines of topics with overrides.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

from broker.cli import topics_options as options
from broker.cli.admin import CommandError, UsageError, code, optional_config
from broker.cli.jopt import Fatal
from broker.cli.kafka_admin import (
    ApiError,
    KafkaAdmin,
    PartitionInfo,
    TopicFilter,
    TopicInfo,
    kafka_uuid,
)

CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, CREATE_PARTITIONS = 19, 20, 32, 37
LIST_PARTITION_REASSIGNMENTS = 46
TOPIC_RESOURCE, DEFAULT_CONFIG = 2, 5
TOPIC_EXISTS: Final = 36
REQUEST_TIMEOUT_MS: Final = 30_000
MAX_SHORT: Final = 32767


@dataclass(frozen=True, slots=True)
class Reassignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Config:
    entries: tuple[tuple[str, str | None, bool], ...]  # name, value, is default

    def get(self, name: str) -> str | None:
        return next((v for n, v, _ in self.entries if n == name), None)

    @property
    def overrides(self) -> list[tuple[str, str | None]]:
        return [(n, v) for n, v, default in self.entries if not default]


class Topics:
    def __init__(self, admin: KafkaAdmin, args: argparse.Namespace, out: TextIO) -> None:
        self.admin, self.args, self.out = admin, args, out

    def print(self, text: str = "") -> None:
        print(text, file=self.out)

    # --- listing ----------------------------------------------------------------------------

    async def listing(self) -> dict[str, TopicInfo]:
        found = await self.admin.metadata(None)
        return {n: t for n, t in found.items() if t is not None}

    async def names(self) -> list[str]:
        """getTopics: every topic (internal ones unless --exclude-internal), sorted, filtered
        by --topic."""
        exclude = self.args.exclude_internal
        topics = sorted(
            n for n, t in (await self.listing()).items() if not (exclude and t.internal)
        )
        if self.args.topic is None:
            return topics
        include = TopicFilter(self.args.topic)
        return [t for t in topics if include.allows(t)]

    def ensure_exists(self, found: list[str]) -> None:
        topic = self.args.topic
        if topic and not self.args.if_exists and not found:
            raise Fatal(f"Topic '{topic}' does not exist as expected")

    # --- actions ----------------------------------------------------------------------------

    async def create(self) -> None:
        name = self.args.topic
        assignment = (
            options.parse_replica_assignment(self.args.replica_assignment)
            if self.args.replica_assignment
            else {}
        )
        configs = options.parse_configs(self.args.config)
        if _collides(name):
            self.print(
                "WARNING: Due to limitations in metric names, topics with a period ('.') or "
                "underscore ('_') could collide. To avoid issues it is best to use either, but "
                "not both."
            )
        rf, partitions = self.args.replication_factor, self.args.partitions
        if rf is not None and not 1 <= rf <= MAX_SHORT:
            raise Fatal(f"The replication factor must be between 1 and {MAX_SHORT} inclusive")
        if partitions is not None and partitions < 1:
            raise Fatal("The partitions must be greater than 0")
        topic: dict[str, Any] = {
            "name": name,
            "num_partitions": -1 if assignment or partitions is None else partitions,
            "replication_factor": -1 if assignment or rf is None else rf,
            "assignments": [
                {"partition_index": p, "broker_ids": brokers} for p, brokers in assignment.items()
            ],
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }
        resp = await self.admin.call(
            CREATE_TOPICS,
            {"topics": [topic], "timeout": REQUEST_TIMEOUT_MS, "validate_only": False},
        )
        (result,) = resp.topics
        err = code(result.error_code)
        if err == TOPIC_EXISTS and self.args.if_not_exists:
            return
        if err:
            raise ApiError(err, result.error_message)
        self.print(f"Created topic {name}.")

    async def list_topics(self) -> None:
        self.print("\n".join(await self.names()))

    async def alter(self) -> None:
        assignment = (
            options.parse_replica_assignment(self.args.replica_assignment)
            if self.args.replica_assignment
            else {}
        )
        options.parse_configs(self.args.config)
        topics = await self.names()
        self.ensure_exists(topics)
        if not topics:
            return
        described = await self.admin.describe_topics(topics, 2000)
        requests = []
        for t in topics:
            start = len(described[t].partitions)
            new = [assignment[p] for p in sorted(assignment) if p >= start]
            requests.append(
                {
                    "name": t,
                    "count": self.args.partitions,
                    "assignments": [{"broker_ids": b} for b in new] if assignment else None,
                }
            )
        resp = await self.admin.call(
            CREATE_PARTITIONS,
            {"topics": requests, "timeout": REQUEST_TIMEOUT_MS, "validate_only": False},
        )
        for r in resp.results:
            if code(r.error_code):
                raise ApiError(code(r.error_code), r.error_message)

    async def delete(self) -> None:
        topics = await self.names()
        self.ensure_exists(topics)
        if not topics:
            return
        resp = await self.admin.call(
            DELETE_TOPICS,
            {"topics": [{"name": t} for t in topics], "timeout": REQUEST_TIMEOUT_MS},
        )
        for r in resp.responses:
            if code(r.error_code):
                raise ApiError(code(r.error_code), r.error_message)

    async def describe(self) -> None:
        topic_id = _parse_topic_id(self.args.topic_id)
        if topic_id is not None:
            listing = await self.listing()
            exclude = self.args.exclude_internal
            names = [
                n
                for n, t in listing.items()
                if t.topic_id == topic_id and not (exclude and t.internal)
            ]
            if not names and not self.args.if_exists:
                raise Fatal(f"TopicId '{kafka_uuid(topic_id)}' does not exist as expected")
        else:
            names = await self.names()
            self.ensure_exists(names)
        limit = self.args.partition_size_limit_per_response or 2000
        described = await self.admin.describe_topics(names, limit)
        configs = {n: await self.config(n) for n in described}
        live = await self.admin.live_brokers()
        reassignments = await self.reassignments(set(described))
        report = Report(self.args, live)
        for name in sorted(described, key=names.index):
            td = described[name]
            config = configs[name]
            parts = sorted(td.partitions, key=lambda p: p.partition)
            overrides_ok = not self.args.topics_with_overrides or config.overrides
            if report.configs and parts and overrides_ok:
                first = parts[0]
                rf = _replication_factor(first, reassignments.get((name, first.partition)))
                line = f"Topic: {name}"
                if td.topic_id is not None:
                    line += f"\tTopicId: {kafka_uuid(td.topic_id)}"
                line += f"\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}"
                shown = ",".join(f"{k}={v}" for k, v in config.overrides)
                self.print(line + f"\tConfigs: {shown}")
            if report.partitions:
                for p in parts:
                    ra = reassignments.get((name, p.partition))
                    if report.wants(p, ra, config):
                        self.print(_partition_line(name, p, ra))

    async def config(self, topic: str) -> Config:
        resp = await self.admin.call(
            DESCRIBE_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": topic,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        (r,) = resp.results
        if code(r.error_code):
            raise ApiError(code(r.error_code), r.error_message)
        return Config(
            tuple(
                (str(c.name), None if c.value is None else str(c.value), _is_default(c))
                for c in r.configs
            )
        )

    async def reassignments(self, topics: set[str]) -> dict[tuple[str, int], Reassignment]:
        """The ongoing reassignments of ``topics``; none when the cluster will not say."""
        if not topics or not self.admin.serves(LIST_PARTITION_REASSIGNMENTS):
            return {}
        resp = await self.admin.call(
            LIST_PARTITION_REASSIGNMENTS, {"timeout": REQUEST_TIMEOUT_MS, "topics": None}
        )
        if code(resp.error_code):  # unsupported or not authorized: described without them
            return {}
        return {
            (str(t.name), int(p.partition_index)): Reassignment(
                tuple(map(int, p.replicas)),
                tuple(map(int, p.adding_replicas)),
                tuple(map(int, p.removing_replicas)),
            )
            for t in resp.topics
            if str(t.name) in topics
            for p in t.partitions
        }


class Report:
    """Which lines --describe prints (Kafka's DescribeOptions)."""

    def __init__(self, args: argparse.Namespace, live: set[int]) -> None:
        self.args, self.live = args, live
        self.configs = not any(getattr(args, r) for r in options.REPORTS)
        self.partitions = not args.topics_with_overrides

    def wants(self, p: PartitionInfo, ra: Reassignment | None, config: Config) -> bool:
        if self.configs:
            return True
        has_leader = p.leader >= 0
        min_isr = int(config.get("min.insync.replicas") or "1")
        a = self.args
        return bool(
            (a.under_replicated_partitions and _replication_factor(p, ra) - len(p.isr) > 0)
            or (a.unavailable_partitions and (not has_leader or p.leader not in self.live))
            or (a.under_min_isr_partitions and (not has_leader or len(p.isr) < min_isr))
            or (a.at_min_isr_partitions and len(p.isr) == min_isr)
        )


def _replication_factor(p: PartitionInfo, ra: Reassignment | None) -> int:
    """While a reassignment moves a partition its replicas include the ones being added."""
    if ra is not None and set(p.replicas) & (set(ra.adding) | set(ra.removing)):
        return len(ra.replicas) - len(ra.adding)
    return len(p.replicas)


def _ids(ids: Sequence[int]) -> str:
    return ",".join(map(str, ids))


def _partition_line(topic: str, p: PartitionInfo, ra: Reassignment | None) -> str:
    leader = str(p.leader) if p.leader >= 0 else "none"
    line = (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}"
        f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
    )
    if ra is not None:
        line += f"\tAdding Replicas: {_ids(ra.adding)}\tRemoving Replicas: {_ids(ra.removing)}"
    line += "\tElr: " + ("N/A" if p.elr is None else _ids(p.elr))
    line += "\tLastKnownElr: " + ("N/A" if p.last_known_elr is None else _ids(p.last_known_elr))
    return line


def _is_default(c: Any) -> bool:
    source = getattr(c, "config_source", None)
    if source is not None:
        return int(getattr(source, "value", source)) == DEFAULT_CONFIG
    return bool(getattr(c, "is_default", False))


def _collides(name: str) -> bool:
    return "." in name or "_" in name


def _parse_topic_id(text: str | None) -> uuid.UUID | None:
    """Kafka's Uuid.fromString (22 URL-safe base64 characters); the zero id means none."""
    if text is None:
        return None
    if len(text) > 22:
        raise Fatal(
            f"Input string with prefix `{text[:22]}` is too long to be decoded as a base64 UUID"
        )
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise Fatal(f"Input string `{text}` decoded as {len(text)} bytes, which is not equal "
                    "to the expected 16 bytes of a base64-encoded UUID") from None  # fmt: skip
    if len(raw) != 16:
        raise Fatal(
            f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the "
            "expected 16 bytes of a base64-encoded UUID"
        )
    value = uuid.UUID(bytes=raw)
    return None if value.int == 0 else value


CALLS: Final = {
    "create": "createTopics",
    "list": "listTopics",
    "alter": "listTopics",
    "describe": "listTopics",
    "delete": "listTopics",
}


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        props = optional_config(args.command_config, "--command-config")
    except UsageError as e:
        raise options.failure(str(e)) from None
    action = next(a for a in options.ACTIONS if getattr(args, a))
    try:
        admin = await KafkaAdmin.open(args.bootstrap_server, props, "kafka-topics", CALLS[action])
    except CommandError as e:
        raise options.failure(str(e)) from None
    try:
        topics = Topics(admin, args, out)
        run = {
            "create": topics.create,
            "list": topics.list_topics,
            "alter": topics.alter,
            "describe": topics.describe,
            "delete": topics.delete,
        }[action]
        await run()
    except CommandError as e:
        raise options.failure(str(e)) from None
    finally:
        admin.close()
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        options.check(args, err)
        return asyncio.run(_run(args, out))

    return options.TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
