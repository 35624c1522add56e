"""``kafka-mirrors.sh``: create, alter, list, describe and delete cluster mirrors, and add, remove,
pause and resume their topics (KIP-1279 "Command-Line").

Talks to one destination broker (the first of ``--bootstrap-server`` that answers) with the mirror
RPCs. ``--topic`` is a topic name or a regular expression matched in full: the broker resolves
it, against the source's topics for ``--add`` and against the mirror's topics otherwise; an
``--add`` pattern is also kept by the broker, which adds matching topics created later.
With ``--replication-factor``, ``--add`` creates the missing topics itself (CreateTopics v8 with
the source topic id), reaching the source with the mirror's configs (DescribeConfigs) overlaid by
``--mirror-config`` (which supplies the secrets DescribeConfigs never returns).

``--describe`` prints one row per partition: MIRROR, TOPIC, PARTITION, SOURCE-OFFSET,
DESTINATION-OFFSET, LAG, STATE, then SOURCE-AGE (how long ago the source offset was learnt:
kmirror's SourceOffsetAgeMs; last, so parsers of the first seven columns keep working), and for
mirrors with ``mirror.topic.prefix`` SOURCE-TOPIC (the source's name of the topic). LAG is
``?`` when the source offset is known but not current (the fetcher is failing, or has not
heard from the source for a while); the partitions' reasons follow under "Notes:".

Exit code 0 on success, 1 on any error (reported on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from kio.schema.errors import ErrorCode

from broker.api.mirror import is_topic_pattern
from broker.cli.admin import CommandError, Session, UsageError, run_main
from broker.cli.admin import Parser as _Parser
from broker.cli.admin import check as _check
from broker.cli.admin import code as _code
from broker.cli.admin import code_name as _code_name
from broker.cli.admin import load as _load
from broker.cli.admin import servers as _servers
from broker.metadata.mirror_names import TOPIC_PREFIX_KEY

METADATA, CREATE_TOPICS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 3, 19, 32, 44
CREATE_MIRROR, ADD_TOPICS, REMOVE_TOPICS, LIST_MIRRORS, DESCRIBE_MIRRORS = 94, 95, 96, 98, 99
PAUSE_TOPICS, RESUME_TOPICS, DELETE_MIRROR = 102, 103, 104
MIRROR_RESOURCE = 64
SET = 0

ACTIONS = ("add", "alter", "create", "delete", "describe", "list", "pause", "remove", "resume")
# action -> options it needs, and options it accepts besides the common ones
REQUIRED = {
    "create": ("mirror", "mirror_config"),
    "alter": ("mirror", "mirror_config"),
    "add": ("mirror", "topic"),
    "remove": ("mirror", "topic"),
    "pause": ("mirror", "topic"),
    "resume": ("mirror", "topic"),
    "delete": ("mirror",),
    "list": (),
    "describe": (),
}
ALLOWED = {
    "create": {"mirror", "mirror_config"},
    "alter": {"mirror", "mirror_config"},
    "add": {"mirror", "topic", "replication_factor", "mirror_config"},
    "remove": {"mirror", "topic"},
    "pause": {"mirror", "topic"},
    "resume": {"mirror", "topic"},
    "delete": {"mirror"},
    "list": set(),
    "describe": {"mirror"},
}
VALUED = ("mirror", "mirror_config", "topic", "replication_factor")

HELP = """\
This tool helps to create cluster mirrors and add topics to them.
Option                                  Description
------                                  -----------
--add                                   Add topic(s) to an existing cluster
                                          mirror (supports regex).
--alter                                 Alter the configuration of an existing
                                          cluster mirror.
--bootstrap-server <String: server to   REQUIRED: The destination Kafka server
  connect to>                             to connect to.
--command-config <String: command       Property file containing configs to be
  config property file>                   passed to Admin Client.
--create                                Create a new cluster mirror from a
                                          source cluster.
--delete                                Delete a cluster mirror including its
                                          configuration (it must be empty or
                                          hold only stopped topics).
--describe                              Describe a cluster mirror including
                                          partition lag and state.
--help                                  Print usage information.
--list                                  List all cluster mirrors.
--mirror <String: mirror>               The name of the cluster mirror.
--mirror-config <String: mirror config  Property file containing source
  property file>                          cluster configs for mirroring.
--pause                                 Pause mirroring for topic(s) matching
                                          the pattern (supports regex).
--remove                                Remove topic(s) from an existing
                                          cluster mirror (supports regex).
--replication-factor <Short:            The replication factor to use for the
  replication-factor>                     mirror topic. If not specified, uses
                                          the destination cluster's default.
--resume                                Resume mirroring for previously paused
                                          topic(s) matching the pattern
                                          (supports regex).
--topic <String: topic>                 Topic name or regex pattern to match
                                          topics (e.g., 'my-topic' or 'test-.
                                          *').
--version                               Display Kafka version.
"""


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kafka-mirrors", add_help=False, allow_abbrev=False)
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--bootstrap-server")
    p.add_argument("--command-config")
    p.add_argument("--mirror")
    p.add_argument("--mirror-config")
    p.add_argument("--topic")
    p.add_argument("--replication-factor")
    p.add_argument("--help", action="store_true")
    p.add_argument("--version", action="store_true")
    return p


def _validate(args: argparse.Namespace) -> str:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        listed = ", ".join(f"--{a}" for a in ACTIONS)
        raise UsageError(f"Command must include exactly one action: {listed}")
    action = chosen[0]
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    for opt in REQUIRED[action]:
        if getattr(args, opt) in (None, ""):
            raise UsageError(f"Option --{opt.replace('_', '-')} is required with --{action}")
    for opt in VALUED:
        if getattr(args, opt) is not None and opt not in ALLOWED[action]:
            raise UsageError(f"Option --{opt.replace('_', '-')} is not valid with --{action}")
    if args.replication_factor is not None:
        try:
            rf = int(args.replication_factor)
        except ValueError:
            rf = 0
        if not 0 < rf < 2**15:
            raise UsageError(
                f"--replication-factor must be a positive short, got {args.replication_factor!r}"
            )
    if args.topic is not None and is_topic_pattern(args.topic):
        try:
            re.compile(args.topic)
        except re.error as e:
            raise UsageError(
                f"--topic {args.topic!r} is not a valid regular expression: {e}"
            ) from None
    return action


def _topics_outcome(resp: Any, err: TextIO, verb: str) -> list[str]:
    """Names that succeeded; failures are written to ``err``."""
    _check(resp)
    ok: list[str] = []
    failed = False
    for t in resp.topics:
        code = _code(t.error_code)
        if code:
            failed = True
            print(f"Failed to {verb} topic {t.name}: {_code_name(code)}", file=err)
        else:
            ok.append(str(t.name))
    if failed and resp.error_message:
        print(resp.error_message, file=err)
    return ok


def _fmt_list(names: Sequence[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    cells = [list(header)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)


def _num(v: int) -> str:
    return "-" if v < 0 else str(v)


def _held(source_offset: int, source_lso: int) -> str:
    """The note for records the mirror cannot copy yet (LAG leaves them out): those behind a
    transaction open on the source (between its last stable offset and its high watermark)."""
    if source_lso < 0 or source_offset <= source_lso:
        return ""
    n = source_offset - source_lso
    return (
        f"{n} record(s) held behind a transaction open on the source (source last stable "
        f"offset {source_lso}); copied once it ends"
    )


def _lag(source_offset: int, lag: int) -> str:
    """``?``: the source offset is known but not current (the source is unreachable, or has
    not answered for a while), so the lag is unknown; ``-``: no source offset at all."""
    return "?" if lag < 0 and source_offset >= 0 else _num(lag)


def _age(age: datetime.timedelta | int | None) -> str:
    """How old the source offset is: ``3s``, ``4m12s``, ``2h5m``; ``-`` when unknown."""
    if age is None:
        return "-"
    ms = (
        int(age / datetime.timedelta(milliseconds=1))
        if isinstance(age, datetime.timedelta)
        else age
    )
    if ms < 0:
        return "-"
    s = (ms + 500) // 1000  # rounded, as the notes round
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    return f"{s // 3600}h{s % 3600 // 60}m"


async def _describe_everywhere(s: Session, mirror: str | None) -> list[Any]:
    """DescribeMirrors from every broker of the destination, merged: each node reports the
    mirror partitions it leads (runs the fetchers of), so one node's answer is a part of the
    mirror on a cluster of several nodes."""
    body = {"mirror_names": [mirror] if mirror else [], "include_authorized_operations": False}
    first = await s.call(DESCRIBE_MIRRORS, body)
    _check(first)
    answers = [first]
    md = await s.call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
    here = (s.conn.host, s.conn.port)
    for b in sorted(md.brokers, key=lambda b: int(b.node_id)):
        if (b.host, int(b.port)) == here:
            continue
        other = await Session.open([(b.host, int(b.port))], s.props, what=f"broker {b.node_id}")
        try:
            resp = await other.call(DESCRIBE_MIRRORS, body)
            _check(resp)
            answers.append(resp)
        finally:
            other.close()
    merged: dict[str, Any] = {}
    parts: dict[tuple[str, str], dict[int, Any]] = {}
    for resp in answers:
        for m in resp.mirrors:
            name = str(m.mirror_name)
            merged.setdefault(name, m)
            for t in m.topics:
                found = parts.setdefault((name, str(t.topic_name)), {})
                for p in t.partitions:
                    found.setdefault(int(p.partition_index), p)
    out = []
    for name in sorted(merged):
        m = merged[name]
        topics = [
            _Topic(topic, list(ps.values()))
            for (mname, topic), ps in sorted(parts.items())
            if mname == name
        ]
        out.append(_Mirror(m.mirror_name, m.error_code, topics))
    return out


class _Topic:
    def __init__(self, topic_name: str, partitions: list[Any]) -> None:
        self.topic_name = topic_name
        self.partitions = partitions


class _Mirror:
    def __init__(self, mirror_name: str, error_code: int, topics: list[_Topic]) -> None:
        self.mirror_name = mirror_name
        self.error_code = error_code
        self.topics = topics


async def _describe_mirror_configs(s: Session, mirror: str) -> dict[str, str]:
    resp = await s.call(
        DESCRIBE_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": MIRROR_RESOURCE,
                    "resource_name": mirror,
                    "configuration_keys": None,
                }
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    (r,) = resp.results
    _check(r)
    return {str(c.name): str(c.value) for c in r.configs if c.value is not None}


async def _prefixes(s: Session, mirrors: Sequence[str]) -> dict[str, str]:
    """Each mirror's mirror.topic.prefix ("" when unset or not readable: no column then)."""
    out: dict[str, str] = {}
    for m in mirrors:
        try:
            out[m] = (await _describe_mirror_configs(s, m)).get(TOPIC_PREFIX_KEY, "").strip()
        except CommandError:
            out[m] = ""
    return out


def _unprefixed(prefix: str, topic: str) -> str:
    return topic[len(prefix) :] if prefix and topic.startswith(prefix) else topic


async def _create_for_add(
    s: Session, args: argparse.Namespace, overlay: Mapping[str, str], err: TextIO
) -> list[str]:
    """--add --replication-factor: create the missing topics here with the source's ids."""
    from broker.mirror.source import SourceClient  # the source side is only needed here

    config = {**await _describe_mirror_configs(s, args.mirror), **overlay}
    try:
        source = SourceClient(config, "kafka-mirrors")
    except ValueError as e:
        raise CommandError(str(e)) from None
    try:
        pattern = is_topic_pattern(args.topic)
        found = await asyncio.wait_for(source.topics(None if pattern else [args.topic]), 30)
    except Exception as e:
        raise CommandError(f"cannot list the source's topics: {e}") from None
    finally:
        await source.close()
    prefix = config.get(TOPIC_PREFIX_KEY, "").strip()  # the names made here are prefixed
    rx = re.compile(args.topic) if pattern else None
    names = sorted(
        n
        for n, t in found.items()
        if not t.is_internal and (rx.fullmatch(n) if rx else n == args.topic)
    )
    if not names:
        raise CommandError(f"No topics matching '{args.topic}' found in the source cluster")
    resp = await s.call(
        CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": prefix + n,
                    "num_partitions": max(len(found[n].partitions), 1),
                    "replication_factor": int(args.replication_factor),
                    "assignments": [],
                    "configs": [],
                    "mirror_info": {"topic_id": found[n].topic_id} if found[n].topic_id else None,
                }
                for n in names
            ],
            "timeout": 30_000,
            "validate_only": False,
        },
    )
    for t in resp.topics:
        code = _code(t.error_code)
        if code and code != ErrorCode.topic_already_exists.value:
            raise CommandError(
                f"cannot create topic {t.name}: {t.error_message or ''} ({_code_name(code)})"
            )
    return names


async def _run(action: str, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    props = _load(args.command_config, "--command-config") if args.command_config else {}
    mirror_config = _load(args.mirror_config, "--mirror-config") if args.mirror_config else {}
    s = await Session.open(_servers(args.bootstrap_server), props)
    try:
        return await _dispatch(s, action, args, mirror_config, out, err)
    finally:
        s.close()


async def _dispatch(
    s: Session,
    action: str,
    args: argparse.Namespace,
    mirror_config: Mapping[str, str],
    out: TextIO,
    err: TextIO,
) -> int:
    mirror = args.mirror
    if action == "create":
        resp = await s.call(
            CREATE_MIRROR,
            {
                "mirror_name": mirror,
                "config": [{"name": k, "value": v} for k, v in mirror_config.items()],
            },
        )
        _check(resp)
        print(f"Created mirror {mirror}", file=out)
        return 0
    if action == "delete":
        _check(await s.call(DELETE_MIRROR, {"mirror_name": mirror}))
        print(f"Deleted mirror {mirror}", file=out)
        return 0
    if action == "alter":
        resp = await s.call(
            INCREMENTAL_ALTER_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": MIRROR_RESOURCE,
                        "resource_name": mirror,
                        "configs": [
                            {"name": k, "config_operation": SET, "value": v}
                            for k, v in mirror_config.items()
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
        for r in resp.responses:
            _check(r)
        print(f"Completed updating config for mirror {mirror}.", file=out)
        return 0
    if action == "list":
        resp = await s.call(LIST_MIRRORS, {})
        _check(resp)
        if not resp.mirrors:
            print("No mirrors found", file=out)
            return 0
        listed = [
            (m.mirror_name, m.topic_count, m.source_cluster_id or "-", m.source_bootstrap or "-")
            for m in sorted(resp.mirrors, key=lambda m: str(m.mirror_name))
        ]
        _table(("MIRROR", "TOPICS", "CLUSTER-ID", "BOOTSTRAP-SERVER"), listed, out)
        return 0
    if action == "describe":
        rows: list[tuple[Any, ...]] = []
        notes: list[str] = []
        for m in await _describe_everywhere(s, mirror):
            code = _code(m.error_code)
            if code:
                raise CommandError(f"Mirror {m.mirror_name}: {_code_name(code)}")
            for t in sorted(m.topics, key=lambda t: str(t.topic_name)):
                for p in sorted(t.partitions, key=lambda p: int(p.partition_index)):
                    rows.append(
                        (
                            m.mirror_name,
                            t.topic_name,
                            p.partition_index,
                            _num(p.source_offset),
                            _num(p.destination_offset),
                            _lag(p.source_offset, p.lag),
                            p.state,
                            _age(getattr(p, "source_offset_age", None)),  # kmirror's tagged field
                        )
                    )
                    reason = getattr(p, "state_reason", None)  # kmirror's tagged field
                    if reason:
                        notes.append(f"{t.topic_name}-{p.partition_index} {p.state}: {reason}")
                    held = _held(p.source_offset, getattr(p, "source_last_stable_offset", -1))
                    if held:
                        notes.append(f"{t.topic_name}-{p.partition_index} {p.state}: {held}")
        if not rows:
            print("No mirror partitions found", file=out)
            return 0
        header: tuple[str, ...] = (
            "MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG",
        )  # fmt: skip
        prefixes = await _prefixes(s, sorted({str(r[0]) for r in rows}))
        if any(prefixes.values()):  # a prefixed mirror: the source's name of each topic, last
            rows = [(*r, _unprefixed(prefixes.get(str(r[0]), ""), str(r[1]))) for r in rows]
            header = (*header, "STATE", "SOURCE-AGE", "SOURCE-TOPIC")
            _table(header, rows, out)
        else:
            _table((*header, "STATE", "SOURCE-AGE"), rows, out)
        if notes:
            print("\nNotes:", file=out)
            for note in notes:
                print(note, file=out)
        return 0
    # add / remove / pause / resume
    selectors = [args.topic]
    kept = action == "add" and is_topic_pattern(args.topic)  # the broker keeps add patterns
    if action == "add" and args.replication_factor is not None:
        selectors = await _create_for_add(s, args, mirror_config, err)
        selectors += [args.topic] if kept else []
    key, verb = {
        "add": (ADD_TOPICS, "add"),
        "remove": (REMOVE_TOPICS, "remove"),
        "pause": (PAUSE_TOPICS, "pause"),
        "resume": (RESUME_TOPICS, "resume"),
    }[action]
    resp = await s.call(
        key,
        {
            "mirror_name": mirror,
            "topics": [{"topic_id": None, "topic_name": n} for n in selectors],
        },
    )
    ok = _topics_outcome(resp, err, verb)
    if ok:
        n, names = len(ok), _fmt_list(ok)
        message: Callable[[], str] = {
            "add": lambda: f"Added {n} topic(s) to mirror {mirror}: {names}",
            "remove": lambda: f"Removed {n} topic(s) from mirror {mirror}: {names}",
            "pause": lambda: f"Paused mirroring for {n} topic(s) in mirror {mirror}: {names}",
            "resume": lambda: f"Resumed mirroring for {n} topic(s) in mirror {mirror}: {names}",
        }[action]
        print(message(), file=out)
    if kept and not resp.topics and _code(resp.error_code) == 0:
        print(
            f"No topics match '{args.topic}' yet; mirror {mirror} keeps the pattern and adds "
            f"matching topics created at the source (--remove --topic '{args.topic}' stops that).",
            file=out,
        )
    return 0 if len(ok) == len(resp.topics) else 1


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        return asyncio.run(_run(_validate(args), args, out, err))

    return run_main(
        argv, out, err, parser=_parser(), help_text=HELP, tool="kafka-mirrors.sh",
        what="mirror", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
