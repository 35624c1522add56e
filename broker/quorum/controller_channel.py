"""A broker's channel to the active controller (Kafka's NodeToControllerChannelManager).

Forwarded admin requests (Envelope) and the broker's own BrokerRegistration / BrokerHeartbeat go
to whichever node leads the metadata quorum, on its controller listener. Leadership moves, so a
request is retried, as Kafka's NodeToControllerRequestThread does, when

- no leader is known yet (an election is running): look again after a short backoff;
- the connection to the leader fails or drops before the answer: ask the quorum again;
- the answer's top-level error code is NOT_CONTROLLER (the node lost the leadership since):
  ask the quorum again;
- the quorum names another leader while the request waits for its answer (the old one may be
  frozen or cut off, and would hold it until the timeout): send it to the new one, as Kafka's
  channel does when it disconnects from a controller that lost the leadership;

until the channel's timeout from the first attempt, then `TimeoutError`. With
``attempt_timeout_ms`` each attempt also gives up after that long, and its connection is closed:
the next attempt reconnects. A connection that carried a request into a cut link stays silent
after the heal until TCP retransmits (seconds), and a request abandoned on it (a timeout, a
leader move) would leave the next one waiting there too; a new connection either works at once
or, during a cut, never completes. The pause between
attempts doubles from ``retry_backoff_ms`` up to ``retry_backoff_max_ms`` while attempts keep
failing (reset by any answer); ``retries`` counts them, and a WARN names the request and what
went wrong at most once a minute. Any other answer, errors included, is the caller's; a
CLUSTER_AUTHORIZATION_FAILED (this node's principal lacks CLUSTER_ACTION there) is also logged,
once per controller and request, as the caller retries. A request the controller cannot serve
at any common version
is not retried (`broker.network.errors.UnsupportedVersionError`).

Retrying a request that may have reached the old controller is what Kafka does too: the
controllers' own checks (topic exists, broker epoch) make the repeat harmless or an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY, Registry

from ..network.client import ReconnectingClient
from ..network.errors import NetworkError, UnsupportedVersionError
from ..network.peer_refusals import PeerRefusals
from ..network.retry_backoff import RetryBackoff
from .driver import ClientFactory

log = logging.getLogger(__name__)

# (node id, host, port) of the active controller's controller listener, or None: none known.
LeaderEndpoint = Callable[[], tuple[int, str, int] | None]

NOT_CONTROLLER: Final = int(ErrorCode.not_controller)
DEFAULT_RETRY_BACKOFF_MS: Final = 100  # Kafka's wait when no controller is known
DEFAULT_RETRY_BACKOFF_MAX_MS: Final = 1000  # Kafka's retry.backoff.max.ms
LEADER_CHECK_S: Final = 0.1  # how often a waiting request looks for a new leader
# past an attempt's bound, before the channel gives up on it itself (the connection's timer, at
# the bound, closes the connection first; this catches a connect that is still pending)
ANSWER_GRACE_S: Final = 0.05


class _LeaderMoved(Exception):
    pass


class ControllerChannel:
    def __init__(
        self,
        leader: LeaderEndpoint,
        client_factory: ClientFactory,
        timeout_ms: int,
        *,
        attempt_timeout_ms: int | None = None,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        retry_backoff_max_ms: int = DEFAULT_RETRY_BACKOFF_MAX_MS,
        registry: Registry = REGISTRY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._leader = leader
        self._client_factory = client_factory
        self.timeout_ms = timeout_ms
        self.attempt_timeout_ms = attempt_timeout_ms
        self._backoff = RetryBackoff(
            "request to the active controller",
            retry_backoff_ms,
            max(retry_backoff_ms, retry_backoff_max_ms),
            log,
            monotonic=monotonic,
        )
        self._registry = registry
        self._monotonic = monotonic
        # node id -> (host, port, client); a node's client is replaced if its endpoint changes
        self._clients: dict[int, tuple[str, int, ReconnectingClient]] = {}
        self._closed = False
        self._refusals = PeerRefusals("controller channel")

    async def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        """Send to the active controller and return its decoded response body.

        ``body`` is a kio request body (sent at its own version unless ``version`` says
        otherwise) or a mapping of field values, built at ``version`` or else at the highest
        version both sides support. Raises `TimeoutError` when no controller answered (other
        than NOT_CONTROLLER) within the channel's timeout.
        """
        name = self._api_name(api_key)
        deadline = self._monotonic() + self.timeout_ms / 1000
        last = "no active controller known"
        while True:
            if self._closed:
                raise RuntimeError("the controller channel is closed")
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"{name}: no answer from the active controller within "
                    f"{self.timeout_ms} ms (last: {last})"
                )
            endpoint = self._leader()
            if endpoint is None:
                last = "no active controller known"
            else:
                node, host, port = endpoint
                client = self._client(node, host, port)
                # an attempt's bound: the channel's, else the client's own request timeout
                bound_ms = self.attempt_timeout_ms
                if bound_ms is None:
                    bound_ms = client.request_timeout_ms
                attempt = min(remaining, bound_ms / 1000)
                send = asyncio.ensure_future(
                    self._send(client, api_key, body, version, max(1, int(attempt * 1000)))
                )
                try:
                    response = await self._answer(send, endpoint, attempt + ANSWER_GRACE_S)
                except UnsupportedVersionError:
                    raise
                except _LeaderMoved:
                    self._drop(node)  # the request waits on it: a stuck link, not a reusable one
                    last = f"controller {node} lost the leadership while the request waited"
                    log.info("%s: %s; sending it to the new controller", name, last)
                    continue
                except (NetworkError, TimeoutError) as e:
                    if isinstance(e, TimeoutError):
                        self._drop(node)  # still connecting, or no timer of its own
                    last = f"controller {node} at {host}:{port}: {e or type(e).__name__}"
                    log.debug("%s to the controller: %s; retrying", name, last)
                else:
                    code = _top_level_error(response)
                    # a controller that refuses this node (no CLUSTER_ACTION) is logged once
                    self._refusals.note(f"controller {node} at {host}:{port}", name, code)
                    if code != NOT_CONTROLLER:
                        self._backoff.succeeded()
                        return response
                    last = f"node {node} answered NOT_CONTROLLER"
                    log.debug("%s: %s; looking for the new controller", name, last)
            pause = min(self._backoff.failed(f"{name}: {last}"), deadline - self._monotonic())
            if pause > 0:
                await asyncio.sleep(pause)

    async def _answer(
        self, send: asyncio.Future[Any], endpoint: tuple[int, str, int], timeout: float
    ) -> Any:
        """``send``'s answer within ``timeout``; `_LeaderMoved` as soon as the quorum names
        another leader than ``endpoint`` (the request is then abandoned)."""
        deadline = self._monotonic() + timeout
        try:
            while True:
                left = deadline - self._monotonic()
                if left <= 0:
                    raise TimeoutError("no answer")
                done, _ = await asyncio.wait({send}, timeout=min(left, LEADER_CHECK_S))
                if done:
                    return send.result()
                if self._leader() != endpoint:
                    raise _LeaderMoved
        finally:
            send.cancel()  # no-op once done

    async def _send(
        self,
        client: ReconnectingClient,
        api_key: int,
        body: Any,
        version: int | None,
        timeout_ms: int,
    ) -> Any:
        """The connection's own timer bounds the request: when it lapses the connection is
        closed (`RequestTimeoutError`), so the next attempt opens a new one."""
        if isinstance(body, Mapping):
            if version is None:
                version = await client.version_for(api_key)
            body = build(self._registry.spec(api_key).request_type(version), body)
        return await client.send(body, version, timeout_ms=timeout_ms)

    def _drop(self, node: int) -> None:
        """Close ``node``'s client (its requests fail and are retried): the next one connects
        again."""
        known = self._clients.pop(node, None)
        if known is not None:
            known[2].close()

    def _client(self, node: int, host: str, port: int) -> ReconnectingClient:
        known = self._clients.get(node)
        if known is not None:
            if known[0] == host and known[1] == port:
                return known[2]
            known[2].close()
        client = self._client_factory(node, host, port)
        self._clients[node] = (host, port, client)
        return client

    @property
    def retries(self) -> int:
        """Attempts made again after a failure or NOT_CONTROLLER (a metric)."""
        return self._backoff.retries

    def _api_name(self, api_key: int) -> str:
        try:
            return f"{self._registry.spec(api_key).name} (api key {api_key})"
        except KeyError:
            return f"api key {api_key}"

    async def close(self) -> None:
        self._closed = True
        clients = [c for _, _, c in self._clients.values()]
        self._clients.clear()
        for client in clients:
            client.close()
        for client in clients:
            with contextlib.suppress(Exception):
                await client.wait_closed()


def _top_level_error(response: Any) -> int:
    code = getattr(response, "error_code", 0)
    return int(getattr(code, "value", code))
