"""KIP-1279 mirror admin RPCs, all v0: CreateMirror 94, AddTopicsToMirror 95,
RemoveTopicsFromMirror 96, ListMirrors 98, DescribeMirrors 99, PauseMirrorTopics 102,
ResumeMirrorTopics 103, DeleteMirror 104, BumpLeaderEpochs 105.

Changes go through `MirrorController` (records committed before the answer). Topic selection:
a ``TopicName`` that is a legal topic name is that topic; anything else (``.*``, ``orders-.*``)
is a regular expression matched in full. Add matches it against the SOURCE's topics (non-internal)
and remove/pause/resume against the destination topics of the mirror that the operation applies
to. With ``mirror.topic.prefix`` (`broker.metadata.mirror_names`) add takes source names and
answers with the names made here (prefixed); remove/pause/resume take the names here, except
that remove with a kept add pattern matches it against source names, as add did. (Kafka's prototype resolves patterns in its CLI by connecting to the source itself, which
needs the source's secrets; resolving them here keeps the secrets on the brokers.)
An add pattern is also kept with the mirror (even when it matches nothing yet), so the metadata
sync adds source topics created later; remove with the same pattern text drops it
(`broker.controller.mirror_patterns`).

AddTopicsToMirror creates topics missing locally from the source: same topic id, partition count
and (non-excluded) configs, the default replication factor, in one batch with ``mirror.name``.
An existing local topic whose id differs from the source's is refused (INCONSISTENT_TOPIC_ID).

DescribeMirrors reports every partition this node leads of every topic in the mirror; the state
and last mirrored epoch come from the injected ``states``, the offsets from ``progress``
(defaults: UNKNOWN, and only the local log end offset), and how current the source offset is
from ``freshness`` (mirror_freshness.py: its age, an unknown lag when it is not current).

With an authorizer (the KIP's "Destination cluster permissions"), on the CLUSTER_MIRROR resource
named like the mirror: CreateMirror needs CREATE; Add/Remove/Pause/Resume and DeleteMirror ALTER
(MIRROR_AUTHORIZATION_FAILED), and READ on each topic they name or match
(TOPIC_AUTHORIZATION_FAILED for that topic); ListMirrors shows and DescribeMirrors describes
the mirrors with DESCRIBE (a named one without it: MIRROR_AUTHORIZATION_FAILED);
BumpLeaderEpochs needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from ..controller import mirror_config, mirror_patterns
from ..controller.controller import TopicSpec
from ..controller.mirrors import (
    MirrorController,
    MirrorTopicResult,
    MirrorTopicsOutcome,
    mirror_names,
    mirror_topics,
)
from ..controller.topics import topic_name_error
from ..metadata import mirror_names as names_map
from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, PAUSED_SUFFIX
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, cluster_allowed
from .context import RequestContext
from .dispatcher import Api
from .mirror_freshness import FreshnessFn, source_view
from .services import Services

log = logging.getLogger(__name__)

CREATE_MIRROR, ADD_TOPICS, REMOVE_TOPICS = 94, 95, 96
LIST_MIRRORS, DESCRIBE_MIRRORS = 98, 99
PAUSE_TOPICS, RESUME_TOPICS, DELETE_MIRROR, BUMP_LEADER_EPOCHS = 102, 103, 104, 105
SOURCE_TIMEOUT_S: Final = 15.0
CREATE_PROBE_S: Final = 5.0  # CreateMirror waits this long for the source's cluster id
ACCEPTING_STATES: Final = ("UNKNOWN", "STOPPED")  # the KIP's precondition for AddTopicsToMirror

Code = ErrorCode | MirrorErrorCode
# mirror -> {(topic, partition): (state name, last mirrored epoch or -1)}
StatesFn = Callable[[str], Mapping[tuple[str, int], tuple[str, int]]]
# (mirror, topic, partition) -> (source offset, destination offset, lag, source last stable
# offset) or None; the lag runs to the source's LSO, what a READ_COMMITTED mirror can copy
ProgressFn = Callable[[str, str, int], tuple[int, int, int, int] | None]


class SourceTopicLike(Protocol):
    name: str
    topic_id: Any
    partitions: Mapping[int, Any]
    is_internal: bool


class SourceLike(Protocol):
    """What this module needs of `broker.mirror.source.SourceClient`."""

    async def topics(self, names: Sequence[str] | None = None) -> Mapping[str, Any]: ...
    async def topic_configs(self, names: Sequence[str]) -> Mapping[str, Mapping[str, str]]: ...
    async def cluster_id(self) -> str | None: ...
    async def close(self) -> None: ...


SourceFactory = Callable[[Mapping[str, str], str], SourceLike]


class SourceIdentityError(Exception):
    """The cluster answering as a mirror's source must not be mirrored (itself, or another)."""


def is_topic_pattern(name: str) -> bool:
    """A selector that is not a legal topic name is a regular expression."""
    return bool(name) and topic_name_error(name) is not None


def _default_source(config: Mapping[str, str], client_id: str) -> SourceLike:
    from ..mirror.source import SourceClient  # loaded on use: the fetch side may be absent

    client: SourceLike = SourceClient(config, client_id)
    return client


class MirrorApi:
    def __init__(
        self,
        services: Services,
        mirrors: MirrorController,
        *,
        source_client: SourceFactory | None = None,
        states: StatesFn | None = None,
        progress: ProgressFn | None = None,
        reason: Callable[[str, int], str | None] | None = None,
        freshness: FreshnessFn | None = None,
    ) -> None:
        self.s = services
        self.mirrors = mirrors
        self.source_client = source_client or _default_source
        # the mirror manager's view of its partitions (None: no mirror partitions here)
        self.states: StatesFn = states or (lambda mirror: {})
        self.progress: ProgressFn | None = progress
        self.reason: Callable[[str, int], str | None] = reason or (lambda _t, _p: None)
        self.freshness: FreshnessFn | None = freshness  # the fetchers' view of each source offset
        self._tasks: set[asyncio.Task[None]] = set()

    # -- helpers ---------------------------------------------------------------------------

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(94, self.create_mirror, max_version=0),
            Api(95, self.add_topics, max_version=0),
            Api(96, self.remove_topics, max_version=0),
            Api(98, self.list_mirrors, max_version=0),
            Api(99, self.describe_mirrors, max_version=0),
            Api(102, self.pause_topics, max_version=0),
            Api(103, self.resume_topics, max_version=0),
            Api(104, self.delete_mirror, max_version=0),
            Api(105, self.bump_leader_epochs, max_version=0),
        ]

    def _mirror_denied(self, ctx: RequestContext, op: AclOperation, mirror: str) -> bool:
        a = self.s.authorizer
        return a is not None and not allowed(a, ctx, op, ResourceType.CLUSTER_MIRROR, mirror)

    def _topic_denied(self, ctx: RequestContext, topic: str) -> MirrorTopicResult | None:
        a = self.s.authorizer
        if a is None or allowed(a, ctx, AclOperation.READ, ResourceType.TOPIC, topic):
            return None
        return MirrorTopicResult(
            topic, ErrorCode.topic_authorization_failed, f"Not authorized to read topic {topic}."
        )

    @staticmethod
    def _mirror_refusal(mirror: str) -> MirrorTopicsOutcome:
        return MirrorTopicsOutcome(
            MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED, f"Not authorized on mirror {mirror}."
        )

    @staticmethod
    def _respond(key: int, ctx: RequestContext, data: dict[str, Any]) -> Any:
        cls = REGISTRY.spec(key).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, **data})

    def _client_id(self, mirror: str) -> str:
        return f"kmirror-{self.s.node_id}-mirror-admin-{mirror}"

    async def _with_source(
        self, mirror: str, work: Callable[[SourceLike], Awaitable[Any]]
    ) -> tuple[Any, str | None]:
        """Run ``work`` against the mirror's source; (result, None) or (None, why it failed).

        Every connection first checks who answers (KIP-1279's cluster-id guard): this cluster
        itself, or another cluster than the one first recorded, raises SourceIdentityError
        before any work is done, since mirroring from either would truncate local data."""
        config = mirror_config.client_settings(self.s.image().config(MIRROR_RESOURCE, mirror))
        try:
            client = self.source_client(config, self._client_id(mirror))
        except ValueError as e:
            return None, str(e)
        try:
            cid = await asyncio.wait_for(client.cluster_id(), SOURCE_TIMEOUT_S)
            problem = self.identity_problem(mirror, cid)
            if problem:
                raise SourceIdentityError(problem)
            if cid and not self.cluster_id_of(mirror):
                await self.mirrors.record_source_cluster_id(mirror, cid)
            return await asyncio.wait_for(work(client), SOURCE_TIMEOUT_S), None
        except SourceIdentityError:
            raise
        except Exception as e:  # SourceError, NetworkError, TimeoutError: the source is the issue
            return None, f"cannot reach the source of mirror {mirror}: {e or type(e).__name__}"
        finally:
            try:
                await client.close()
            except Exception:
                log.debug("closing the source client of %s failed", mirror, exc_info=True)

    def identity_problem(self, mirror: str, cid: str | None) -> str | None:
        """Why the cluster answering as ``mirror``'s source must not be mirrored, or None."""
        if not cid:
            return None  # a source too old to report its id: nothing to compare
        servers = (
            self.s.image().config(MIRROR_RESOURCE, mirror).get(mirror_config.BOOTSTRAP_SERVERS, "")
        )
        if cid == self.s.cluster_id:
            return (
                f"The source of mirror {mirror} (bootstrap.servers={servers}) is this cluster "
                f"(cluster id {cid}); a mirror copies from another cluster."
            )
        recorded = self.cluster_id_of(mirror)
        if recorded and recorded != cid:
            return (
                f"The source of mirror {mirror} (bootstrap.servers={servers}) is cluster {cid}, "
                f"but the mirror was created against cluster {recorded}; delete and re-create "
                "the mirror to mirror another cluster."
            )
        return None

    async def check_source(self, mirror: str) -> tuple[bool, str | None]:
        """Connect to the source and check who answers: (checked, why it must not be
        mirrored). (False, None) when it cannot be reached: nothing to fetch from it anyway."""

        async def nothing(_c: SourceLike) -> None:
            return None

        try:
            _, unreachable = await self._with_source(mirror, nothing)
        except SourceIdentityError as e:
            return True, str(e)
        return unreachable is None, None

    def _resolve_cluster_id_later(self, mirror: str) -> None:
        async def resolve() -> None:
            _, problem = await self.check_source(mirror)
            if problem:
                log.error("mirror %s: %s", mirror, problem)

        task = asyncio.get_running_loop().create_task(resolve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cluster_id_of(self, mirror: str) -> str:
        """The source cluster id recorded in the metadata log, or "" while unknown."""
        return (
            self.s.image().config(MIRROR_RESOURCE, mirror).get(mirror_config.SOURCE_CLUSTER_ID_KEY)
            or ""
        )

    @staticmethod
    def _topic_rows(results: Sequence[MirrorTopicResult]) -> list[dict[str, Any]]:
        return [{"name": r.name, "error_code": int(r.error)} for r in results]

    def _topics_response(
        self, key: int, ctx: RequestContext, mirror: str, out: MirrorTopicsOutcome
    ) -> Any:
        failed = [r for r in out.topics if r.error != ErrorCode.none and r.message]
        message = out.message
        if message is None and failed:
            message = "; ".join(r.message or "" for r in failed)
        return self._respond(
            key,
            ctx,
            {
                "error_code": int(out.error),
                "error_message": message,
                "mirror_name": mirror,
                "topics": self._topic_rows(out.topics),
            },
        )

    # -- CreateMirror / DeleteMirror ---------------------------------------------------------

    async def create_mirror(self, ctx: RequestContext, req: Any) -> Any:
        if self._mirror_denied(ctx, AclOperation.CREATE, req.mirror_name):
            out = self._mirror_refusal(req.mirror_name)
            return self._respond(
                CREATE_MIRROR, ctx, {"error_code": int(out.error), "error_message": out.message}
            )
        name = req.mirror_name
        configs = {c.name: c.value for c in req.config}
        code, message = await self.mirrors.create_mirror(name, configs, validate_only=True)
        cid = None
        if code == ErrorCode.none:
            cid = await self._probe_cluster_id(name, configs)
            if cid == self.s.cluster_id:
                code = ErrorCode.inconsistent_cluster_id
                message = (
                    f"The source of mirror {name} (bootstrap.servers="
                    f"{configs.get(mirror_config.BOOTSTRAP_SERVERS)}) is this cluster (cluster id "
                    f"{cid}); a mirror copies from another cluster."
                )
        if code == ErrorCode.none:
            code, message = await self.mirrors.create_mirror(name, configs)
            if code == ErrorCode.none:
                if cid:
                    await self.mirrors.record_source_cluster_id(name, cid)
                else:  # the source is not up yet: recorded on the first connection
                    self._resolve_cluster_id_later(name)
        return self._respond(
            CREATE_MIRROR, ctx, {"error_code": int(code), "error_message": message}
        )

    async def _probe_cluster_id(self, mirror: str, configs: Mapping[str, str | None]) -> str | None:
        """The would-be source's cluster id, if it answers within a few seconds (a mirror may
        be created before its source is up)."""
        settings = mirror_config.client_settings({k: v for k, v in configs.items() if v})
        try:
            client = self.source_client(settings, self._client_id(mirror))
        except ValueError:
            return None
        try:
            return await asyncio.wait_for(client.cluster_id(), CREATE_PROBE_S)
        except Exception as e:
            log.info("mirror %s: source cluster id not resolved yet: %s", mirror, e or type(e))
            return None
        finally:
            try:
                await client.close()
            except Exception:
                log.debug("closing the source client of %s failed", mirror, exc_info=True)

    async def delete_mirror(self, ctx: RequestContext, req: Any) -> Any:
        if self._mirror_denied(ctx, AclOperation.ALTER, req.mirror_name):
            out = self._mirror_refusal(req.mirror_name)
            return self._respond(
                DELETE_MIRROR, ctx, {"error_code": int(out.error), "error_message": out.message}
            )
        code, message = await self.mirrors.delete_mirror(req.mirror_name)
        return self._respond(
            DELETE_MIRROR, ctx, {"error_code": int(code), "error_message": message}
        )

    # -- topic selection ----------------------------------------------------------------------

    @staticmethod
    def _select(
        selectors: Sequence[str],
        candidates: Sequence[str],
        may_match_nothing: Sequence[str] = (),
        source_name: Callable[[str], str] | None = None,
    ) -> tuple[list[str], str | None, Code]:
        """Literal names as given, patterns expanded over ``candidates``; or an error (a pattern
        matching nothing is one, unless it is in ``may_match_nothing``). The patterns in
        ``may_match_nothing`` (an --add pattern kept with the mirror) are matched against each
        candidate's ``source_name`` (a prefixed mirror's patterns name source topics)."""
        names: list[str] = []
        for sel in selectors:
            if not is_topic_pattern(sel):
                names.append(sel)
                continue
            try:
                rx = re.compile(sel)
            except re.error as e:
                return (
                    [],
                    f"Invalid regular expression '{sel}': {e}",
                    ErrorCode.invalid_regular_expression,
                )
            as_source = source_name is not None and sel in may_match_nothing
            matched = [
                c
                for c in candidates
                if rx.fullmatch(source_name(c) if as_source and source_name else c)
            ]
            if not matched and sel not in may_match_nothing:
                return [], f"No topics match '{sel}'", ErrorCode.unknown_topic_or_partition
            names.extend(matched)
        return list(dict.fromkeys(names)), None, ErrorCode.none

    # -- AddTopicsToMirror -------------------------------------------------------------------

    async def add_topics(self, ctx: RequestContext, req: Any) -> Any:
        mirror = req.mirror_name
        if self._mirror_denied(ctx, AclOperation.ALTER, mirror):
            return self._topics_response(ADD_TOPICS, ctx, mirror, self._mirror_refusal(mirror))
        img = self.s.image()
        if not img.config(MIRROR_RESOURCE, mirror):
            return self._topics_response(
                ADD_TOPICS,
                ctx,
                mirror,
                MirrorTopicsOutcome(
                    MirrorErrorCode.UNKNOWN_MIRROR, f"Mirror {mirror} does not exist."
                ),
            )
        selectors = [t.topic_name for t in req.topics]
        patterns = [s for s in selectors if is_topic_pattern(s)]

        naming = names_map.naming(img.config(MIRROR_RESOURCE, mirror))

        async def look(
            client: SourceLike,
        ) -> tuple[Mapping[str, Any], Mapping[str, Mapping[str, str]]]:
            found = await client.topics(None if patterns else selectors)
            here = self.s.image().topics
            missing = [n for n in found if naming.local_topic(n) not in here]
            configs = await client.topic_configs(missing) if missing else {}
            return found, configs

        try:
            looked, source_error = await self._with_source(mirror, look)
        except SourceIdentityError as e:
            return self._topics_response(
                ADD_TOPICS,
                ctx,
                mirror,
                MirrorTopicsOutcome(ErrorCode.inconsistent_cluster_id, str(e)),
            )
        found: Mapping[str, Any] = looked[0] if looked else {}
        source_configs: Mapping[str, Mapping[str, str]] = looked[1] if looked else {}
        if patterns and source_error:
            return self._topics_response(
                ADD_TOPICS,
                ctx,
                mirror,
                MirrorTopicsOutcome(ErrorCode.network_exception, source_error),
            )
        candidates = sorted(
            n for n, t in found.items() if not t.is_internal and not n.startswith("__")
        )
        names, why, code = self._select(selectors, candidates, patterns)
        if why:
            return self._topics_response(ADD_TOPICS, ctx, mirror, MirrorTopicsOutcome(code, why))

        early: dict[str, MirrorTopicResult] = {}
        new_topics: dict[str, TopicSpec] = {}
        origins: dict[str, str] = {}
        states = self.states(mirror)
        img = self.s.image()
        # --add names and patterns are the SOURCE's; from here on a topic is named as it is
        # stored here (mirror.topic.prefix + source name), and the answer names it so
        # a pattern passes over source topics that mirror this cluster (named: refused below)
        literal = {sel for sel in selectors if not is_topic_pattern(sel)}
        names = [
            n
            for n in names
            if n in literal
            or naming.local_topic(n) in img.topics
            or not names_map.loops_back(source_configs.get(n, {}), self.s.cluster_id)
        ]
        local_of = {n: naming.local_topic(n) for n in names}
        clashes = names_map.collisions(mirror, local_of) if naming.prefix else {}
        names, source_of = [local_of[n] for n in names], {v: k for k, v in local_of.items()}
        for name in names:
            local = img.topics.get(name)
            src = found.get(source_of[name])
            why = clashes.get(source_of[name]) or names_map.local_name_error(
                mirror, source_of[name], name
            )
            if why is not None:
                early[name] = MirrorTopicResult(name, ErrorCode.invalid_topic_exception, why)
                continue
            src_configs = source_configs.get(source_of[name], {})
            if local is None and names_map.loops_back(src_configs, self.s.cluster_id):
                early[name] = MirrorTopicResult(
                    name,
                    ErrorCode.invalid_request,
                    names_map.loop_message(mirror, source_of[name], self.s.cluster_id),
                )
                continue
            refused = self._topic_denied(ctx, name)
            if refused is not None:
                early[name] = refused
                continue
            if (
                local is not None
                and naming.prefix
                and not img.config(TOPIC_RESOURCE, name).get(MIRROR_NAME_CONFIG)
                and (src is None or src.topic_id != local.topic_id)
            ):  # a prefixed mirror never adopts a topic of ours (same id: its own, failed over)
                early[name] = MirrorTopicResult(
                    name,
                    ErrorCode.topic_already_exists,
                    f"Mirror {mirror} would store source topic {source_of[name]} as {name}, "
                    f"which exists here and is not a mirror topic.",
                )
                continue
            if local is not None:
                if src is not None and src.topic_id and src.topic_id != local.topic_id:
                    early[name] = MirrorTopicResult(
                        name,
                        ErrorCode.inconsistent_topic_id,
                        f"Topic {name} has id {local.topic_id} here but {src.topic_id} at the source.",
                    )
                    continue
                if img.config(TOPIC_RESOURCE, name).get(MIRROR_NAME_CONFIG):
                    continue  # already in a mirror: the controller answers TOPIC_ALREADY_IN_MIRROR
                busy = [
                    f"{p}:{states[(name, p)][0]}"
                    for p in local.partitions
                    if (name, p) in states and states[(name, p)][0] not in ACCEPTING_STATES
                ]
                if busy:
                    early[name] = MirrorTopicResult(
                        name,
                        ErrorCode.invalid_request,
                        f"Topic {name} has partitions neither UNKNOWN nor STOPPED: {', '.join(busy)}",
                    )
            elif src is not None:
                clash = names_map.clashing_local(name, img.topics)
                if clash is not None:
                    early[name] = MirrorTopicResult(
                        name,
                        ErrorCode.topic_already_exists,
                        f"Mirror {mirror} would store source topic {source_of[name]} as "
                        f"{name}, which collides with topic {clash} here.",
                    )
                    continue
                new_topics[name] = TopicSpec(
                    name,
                    num_partitions=max(len(src.partitions), 1),
                    configs=dict(self.mirrors.sanitize_topic_configs(mirror, src_configs)),
                    topic_id=src.topic_id,
                )
                chain = names_map.chain_value(
                    src_configs.get(names_map.SOURCE_CLUSTER_IDS_CONFIG),
                    self.cluster_id_of(mirror) or None,
                )
                if chain:
                    origins[name] = chain
            elif source_error:
                early[name] = MirrorTopicResult(name, ErrorCode.network_exception, source_error)
            else:
                early[name] = MirrorTopicResult(
                    name,
                    ErrorCode.unknown_topic_or_partition,
                    f"Topic {source_of[name]} exists neither here nor at the source of mirror "
                    f"{mirror}.",
                )
        out = await self.mirrors.add_topics(
            mirror,
            [n for n in names if n not in early],
            new_topics,
            patterns=patterns,
            origins=origins,
        )
        if out.error == ErrorCode.none:
            by_name = {r.name: r for r in out.topics}
            out.topics = [early.get(n) or by_name[n] for n in names]
        return self._topics_response(ADD_TOPICS, ctx, mirror, out)

    # -- Remove / Pause / Resume -------------------------------------------------------------

    async def _change(
        self,
        key: int,
        ctx: RequestContext,
        req: Any,
        applies: Callable[[str, str], bool],
        op: Callable[[str, Sequence[str]], Awaitable[MirrorTopicsOutcome]],
        may_match_nothing: Sequence[str] = (),
    ) -> Any:
        mirror = req.mirror_name
        if self._mirror_denied(ctx, AclOperation.ALTER, mirror):
            return self._topics_response(key, ctx, mirror, self._mirror_refusal(mirror))
        img = self.s.image()
        if not img.config(MIRROR_RESOURCE, mirror):
            out = MirrorTopicsOutcome(
                MirrorErrorCode.UNKNOWN_MIRROR, f"Mirror {mirror} does not exist."
            )
            return self._topics_response(key, ctx, mirror, out)
        candidates = [t for t, v in mirror_topics(img, mirror).items() if applies(mirror, v)]
        naming = names_map.naming(img.config(MIRROR_RESOURCE, mirror))
        names, why, code = self._select(
            [t.topic_name for t in req.topics], candidates, may_match_nothing, naming.source_topic
        )
        if why:
            return self._topics_response(
                key, ctx, mirror, MirrorTopicsOutcome(code, f"{why} in mirror {mirror}")
            )
        refused = {n: r for n in names if (r := self._topic_denied(ctx, n)) is not None}
        out = await op(mirror, [n for n in names if n not in refused])
        if refused and out.error == ErrorCode.none:
            by_name = {r.name: r for r in out.topics}
            out.topics = [refused.get(n) or by_name[n] for n in names]
        return self._topics_response(key, ctx, mirror, out)

    async def remove_topics(self, ctx: RequestContext, req: Any) -> Any:
        stored = mirror_patterns.include_patterns(
            self.s.image().config(MIRROR_RESOURCE, req.mirror_name)
        )
        patterns = [t.topic_name for t in req.topics if t.topic_name in stored]

        def remove(mirror: str, names: Sequence[str]) -> Awaitable[MirrorTopicsOutcome]:
            return self.mirrors.remove_topics(mirror, names, patterns)

        return await self._change(
            REMOVE_TOPICS, ctx, req, lambda m, v: v in (m, m + PAUSED_SUFFIX), remove, patterns
        )

    async def pause_topics(self, ctx: RequestContext, req: Any) -> Any:
        return await self._change(
            PAUSE_TOPICS, ctx, req, lambda m, v: v == m, self.mirrors.pause_topics
        )

    async def resume_topics(self, ctx: RequestContext, req: Any) -> Any:
        return await self._change(
            RESUME_TOPICS, ctx, req, lambda m, v: v == m + PAUSED_SUFFIX, self.mirrors.resume_topics
        )

    # -- ListMirrors / DescribeMirrors -------------------------------------------------------

    async def list_mirrors(self, ctx: RequestContext, req: Any) -> Any:
        img = self.s.image()
        rows = [
            {
                "mirror_name": m,
                "source_bootstrap": img.config(MIRROR_RESOURCE, m).get("bootstrap.servers", ""),
                "source_cluster_id": self.cluster_id_of(m),
                "topic_count": len(mirror_topics(img, m)),
            }
            for m in mirror_names(img)
            if not self._mirror_denied(ctx, AclOperation.DESCRIBE, m)
        ]
        return self._respond(
            LIST_MIRRORS, ctx, {"error_code": 0, "error_message": None, "mirrors": rows}
        )

    def _local_offset(self, topic: str, partition: int) -> int:
        hosted = self.s.replicas.get(topic, partition)
        return int(hosted.log.log_end_offset) if hosted is not None else -1

    async def describe_mirrors(self, ctx: RequestContext, req: Any) -> Any:
        img = self.s.image()
        wanted = list(dict.fromkeys(req.mirror_names)) or [
            m for m in mirror_names(img) if not self._mirror_denied(ctx, AclOperation.DESCRIBE, m)
        ]
        rows: list[dict[str, Any]] = []
        for m in wanted:
            if self._mirror_denied(ctx, AclOperation.DESCRIBE, m):
                rows.append(
                    {
                        "error_code": int(MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED),
                        "mirror_name": m,
                        "topics": [],
                    }
                )
                continue
            if not img.config(MIRROR_RESOURCE, m):
                rows.append(
                    {
                        "error_code": int(MirrorErrorCode.UNKNOWN_MIRROR),
                        "mirror_name": m,
                        "topics": [],
                    }
                )
                continue
            states = self.states(m)
            now_ms = self.s.now_ms()
            topics: list[dict[str, Any]] = []
            # topics in the mirror, and those that left it by failover (their stored state and
            # last mirrored epoch are what a failback asks for)
            names = list(dict.fromkeys([*mirror_topics(img, m), *(t for t, _p in sorted(states))]))
            for name in (n for n in names if n in img.topics):
                t = img.topics[name]
                parts: list[dict[str, Any]] = []
                for p in sorted(t.partitions):
                    if t.partitions[p].leader != self.s.node_id:
                        continue  # its leader reports it
                    state, lme = states.get((name, p), ("UNKNOWN", -1))
                    prog = self.progress(m, name, p) if self.progress is not None else None
                    src, dst, lag, src_lso = (
                        prog if prog is not None else (-1, self._local_offset(name, p), -1, -1)
                    )
                    fresh = self.freshness(m, name, p) if self.freshness is not None else None
                    view = source_view(src, lag, state, self.reason(name, p), fresh, now_ms)
                    parts.append(
                        {
                            "partition_index": p,
                            "source_offset": src,
                            "destination_offset": dst,
                            "lag": view.lag,
                            "state": state,
                            "last_mirror_epoch": lme,
                            "state_reason": view.reason,
                            "source_offset_age": view.age_ms,
                            "source_last_stable_offset": src_lso,
                        }
                    )
                topics.append({"topic_name": name, "partitions": parts})
            rows.append({"error_code": 0, "mirror_name": m, "topics": topics})
        return self._respond(
            DESCRIBE_MIRRORS, ctx, {"error_code": 0, "error_message": None, "mirrors": rows}
        )

    # -- BumpLeaderEpochs --------------------------------------------------------------------

    async def bump_leader_epochs(self, ctx: RequestContext, req: Any) -> Any:
        if not cluster_allowed(self.s.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return self._respond(
                BUMP_LEADER_EPOCHS,
                ctx,
                {"error_code": int(ErrorCode.cluster_authorization_failed), "topics": []},
            )
        results = await self.mirrors.bump_leader_epochs(
            (t.topic_id, p.partition_index, p.min_leader_epoch)
            for t in req.topics
            for p in t.partitions
        )
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in results:
            by_topic.setdefault(r.topic, []).append(
                {"partition_index": r.partition, "error_code": int(r.error)}
            )
        return self._respond(
            BUMP_LEADER_EPOCHS,
            ctx,
            {
                "error_code": 0,
                "topics": [{"topic_name": n, "partitions": ps} for n, ps in by_topic.items()],
            },
        )
