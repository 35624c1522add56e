"""Request dispatch: decode a frame, run the handler for its api key, encode the response.

ApiVersions is derived from the handler table here (the intersection of what each handler serves
and what the codec knows), never written by hand. A request whose header parses but whose body
does not closes its connection unanswered, as Kafka's socket server does, with one WARN line
naming the listener, the client, the api key and version.

Before a handler runs: a coordinator key no record can hold gets the API's error
(``key_limits.py``), a controller write on a controller listener of a node that is not the
active controller gets NOT_CONTROLLER, and a controller write answers REQUEST_TIMED_OUT when it
cannot complete within the request's timeout (``admin_deadline.py``).

Each listener serves its own set (``listener_apis.py``, Kafka's split between broker and
controller listeners): ApiVersions on a listener lists that set, and a request for an API the
listener does not serve closes the connection unanswered, as Kafka's socket server does.

An optional `Forwarding` hook (a broker's `forwarding.Forwarder`) may answer a decoded request
instead of its handler: admin requests go to the active controller. Raw (hot) APIs never see
it. `handle_embedded` serves a request that came inside an Envelope, without that hook.
"""

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from protocol.errors import (
    RequestBodyError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from protocol.headers import encode_response_header, parse_request_header
from protocol.readers import Buffer
from protocol.registry import REGISTRY, Registry, body_bytes, decode_body

from ..quorum.driver import NotLeaderError
from . import admin_deadline
from .client_throttle import ClientThrottle, timed_raw_request, timed_request
from .context import RequestContext
from .error_counts import error_counts
from .error_response import error_response
from .key_limits import oversized_key
from .listener_apis import ListenerApis, NotEnabledOnListener

log = logging.getLogger(__name__)

Handler = Callable[[RequestContext, Any], Awaitable[Any]]
# Raw handlers see the frame and where the body starts; they return the encoded body parts,
# or None for "no response" (Produce with acks=0).
RawHandler = Callable[[RequestContext, memoryview, int], Awaitable[list[Buffer] | None]]
Encoder = Callable[[Any, int], bytes]
# (api key, version, seconds, error code -> count in the response or None when not counted)
OnRequest = Callable[[int, int, float, Mapping[int, int] | None], None]

API_VERSIONS = 18


class Forwarding(Protocol):
    @property
    def api_keys(self) -> Set[int]: ...

    async def forward(
        self, ctx: RequestContext, frame: memoryview, request: Any
    ) -> tuple[list[Buffer], Mapping[int, int] | None] | None:
        """The response payload (header included) and its error counts, or None: serve here."""
        ...


@dataclass(slots=True)
class Api:
    key: int
    handler: Handler | None = None
    raw: RawHandler | None = None
    min_version: int = 0
    max_version: int = 1 << 15
    encoder: Encoder | None = None  # hand-written response encoder for a hot API
    # Lower min version shown in ApiVersions than served (Kafka 4 shows Produce v0+ so that
    # librdkafka < 2.10 keeps gzip/snappy/lz4 enabled; v0-v2 requests are still refused).
    advertised_min_version: int | None = None
    # Served (and advertised) only while this says so (share groups: group.share.enable or
    # share.version 1); otherwise as an api key this node does not know. None: always.
    enabled: Callable[[], bool] | None = None


class Dispatcher:
    def __init__(
        self,
        apis: Sequence[Api],
        registry: Registry = REGISTRY,
        on_request: OnRequest | None = None,
        forwarding: Forwarding | None = None,
        quotas: ClientThrottle | None = None,
        controller_listeners: Collection[str] | None = None,
    ) -> None:
        """``controller_listeners``: split the APIs between controller and broker listeners
        (`ListenerApis`); None serves every API on every listener (unit tests). A controller
        write on a controller listener of a node that is not the active controller runs its
        handler, which authorizes first (as Kafka's ControllerApis do) and then gets
        `NotLeaderError` at once from the controller: answered NOT_CONTROLLER below."""
        self._registry = registry
        self._quotas = quotas  # request_percentage client quotas; None: not enforced
        self._forwarding = forwarding
        self._apis: dict[int, Api] = {}
        self._ranges: dict[int, tuple[int, int]] = {}
        self._advertised: dict[int, tuple[int, int]] = {}
        self._on_request = on_request
        for api in apis:
            spec = registry.spec(api.key)
            lo = max(api.min_version, spec.min_version)
            hi = min(api.max_version, spec.max_version)
            if lo > hi:
                raise ValueError(f"api {api.key}: no version both the handler and codec serve")
            self._apis[api.key] = api
            self._ranges[api.key] = (lo, hi)
            adv_lo = lo if api.advertised_min_version is None else api.advertised_min_version
            self._advertised[api.key] = (adv_lo, hi)
        self.listener_apis = (
            None
            if controller_listeners is None
            else ListenerApis(self._apis.keys(), controller_listeners)
        )

    def supported_versions(self, listener: str | None = None) -> dict[int, tuple[int, int]]:
        """What ApiVersions advertises on ``listener`` (served ranges, except
        advertised_min_version; APIs switched off by their ``enabled`` left out); every API the
        node serves when ``listener`` is None."""
        split = self.listener_apis
        keys = None if listener is None or split is None else split.keys(listener)
        return {
            k: r
            for k, r in self._advertised.items()
            if (keys is None or k in keys) and ((on := self._apis[k].enabled) is None or on())
        }

    def _header_version(self, key: int, version: int) -> int:
        return self._registry.request_header_version(key, version)

    async def handle(
        self, ctx_factory: Callable[[Any], RequestContext], frame: memoryview
    ) -> list[Buffer] | None:
        """Handle one request frame; returns the response payload parts (no size prefix)."""
        started = time.perf_counter()
        # A header that does not parse raises ProtocolError: the caller closes the connection.
        header, pos = parse_request_header(frame, self._header_version)
        key, version = header.api_key, header.api_version
        api = self._apis.get(key)
        ctx = ctx_factory(header)
        errors: Mapping[int, int] | None = None
        try:
            if api is None or (api.enabled is not None and not api.enabled()):
                raise UnknownApiKeyError(key, version, header.correlation_id)
            split = self.listener_apis
            if split is not None and not split.serves(ctx.listener, key):
                raise NotEnabledOnListener(
                    key, version, header.correlation_id, header.client_id, ctx.listener
                )
            lo, hi = self._ranges[key]
            if not lo <= version <= hi:
                raise UnsupportedVersionError(key, version, header.correlation_id, lo, hi)
            quotas = self._quotas
            timed = quotas is not None and quotas.request_quota_applies(ctx)
            if api.raw is not None:
                if timed:
                    assert quotas is not None
                    parts = await timed_raw_request(quotas, ctx, api.raw(ctx, frame, pos))
                else:
                    parts = await api.raw(ctx, frame, pos)
                if parts is None:
                    return None
                return [
                    encode_response_header(header.correlation_id, self._resp_header(key, version)),
                    *parts,
                ]
            spec = self._registry.spec(key)
            try:
                body = decode_body(spec.request_type(version), frame, pos, strict=False)
            except Exception as e:
                raise RequestBodyError(
                    f"{spec.name} v{version} request: {e}",
                    key,
                    version,
                    header.correlation_id,
                    header.client_id,
                ) from None
            assert api.handler is not None
            refused = oversized_key(key, body)
            if refused is not None:
                code, message = refused
                resp = error_response(key, version, body, code, message)
                errors = error_counts(resp)
                return [
                    encode_response_header(header.correlation_id, self._resp_header(key, version)),
                    body_bytes(resp),
                ]
            fwd = self._forwarding
            if fwd is not None and key in fwd.api_keys:
                forwarded = await fwd.forward(ctx, frame, body)
                if forwarded is not None:
                    parts, errors = forwarded
                    return parts
            call = api.handler(ctx, body)
            if timed:
                assert quotas is not None
                call = timed_request(quotas, ctx, call)
            limit = admin_deadline.timeout_ms(key, body)
            try:
                done, resp = await admin_deadline.within(limit, call)
            except NotLeaderError as e:
                # a request on the controller listener of a controller that is not (or no
                # longer) the active one: NOT_CONTROLLER, as Kafka's ControllerApis answers, so
                # the client looks for the active controller; not a handler failure that
                # closes the connection
                log.debug("%s v%d: %s", spec.name, version, e)
                done = True
                resp = error_response(key, version, body, ErrorCode.not_controller, str(e))
            if not done:
                message = f"The controller did not complete the request within {limit} ms"
                log.info("%s v%d from %r: %s", spec.name, version, header.client_id, message)
                resp = error_response(key, version, body, ErrorCode.request_timed_out, message)
            if resp is None:
                return None
            if self._on_request is not None:
                errors = error_counts(resp)
            payload = api.encoder(resp, version) if api.encoder else body_bytes(resp)
            return [
                encode_response_header(header.correlation_id, self._resp_header(key, version)),
                payload,
            ]
        except UnsupportedVersionError as e:
            if key == API_VERSIONS:
                return self._api_versions_unsupported(header.correlation_id, ctx.listener)
            log.info("closing: %s from client %r", e, header.client_id)
            raise
        except (UnknownApiKeyError, NotEnabledOnListener) as e:
            log.info("closing: %s from client %r", e, header.client_id)
            raise
        except RequestBodyError as e:
            # Kafka's socket server closes a connection whose request body does not parse
            # (no answer; the requests pipelined after it are dropped)
            log.warning(
                "closing connection %s on listener %s: api key %d v%d request from client %r "
                "does not parse: %s",
                ctx.connection_id,
                ctx.listener,
                key,
                version,
                header.client_id,
                e,
            )
            errors = {ErrorCode.invalid_request: 1}
            if ctx.connection is not None:
                ctx.connection.close(fatal=True)
            return None
        finally:
            if self._on_request is not None:
                self._on_request(key, version, time.perf_counter() - started, errors)

    async def handle_embedded(
        self, ctx_factory: Callable[[Any], RequestContext], frame: memoryview
    ) -> tuple[bytes, Mapping[int, int]]:
        """Serve a request forwarded inside an Envelope: its response (header and body) and the
        error codes in it. Never forwarded again. Raises `RequestError` (unknown api key,
        version not served, unreadable body) or `ProtocolError` (unreadable header)."""
        started = time.perf_counter()
        header, pos = parse_request_header(frame, self._header_version)
        key, version, corr = header.api_key, header.api_version, header.correlation_id
        api = self._apis.get(key)
        if api is None or api.handler is None:
            raise UnknownApiKeyError(key, version, corr)
        lo, hi = self._ranges[key]
        if not lo <= version <= hi:
            raise UnsupportedVersionError(key, version, corr, lo, hi)
        spec = self._registry.spec(key)
        try:
            body = decode_body(spec.request_type(version), frame, pos, strict=False)
        except Exception as e:
            raise RequestBodyError(
                f"{spec.name} v{version} request: {e}", key, version, corr, header.client_id
            ) from None
        errors: Mapping[int, int] | None = None
        try:
            refused = oversized_key(key, body)
            if refused is not None:
                resp = error_response(key, version, body, refused[0], refused[1])
            else:
                limit = admin_deadline.timeout_ms(key, body)
                done, resp = await admin_deadline.within(
                    limit, api.handler(ctx_factory(header), body)
                )
                if not done:
                    message = f"The controller did not complete the request within {limit} ms"
                    resp = error_response(key, version, body, ErrorCode.request_timed_out, message)
            if resp is None:
                raise RuntimeError(f"{spec.name} handler gave no response to a forwarded request")
            errors = error_counts(resp)
            payload = api.encoder(resp, version) if api.encoder else body_bytes(resp)
            return encode_response_header(corr, self._resp_header(key, version)) + payload, errors
        finally:
            if self._on_request is not None:
                self._on_request(key, version, time.perf_counter() - started, errors)

    def _resp_header(self, key: int, version: int) -> int:
        return self._registry.spec(key).response_header_version(version)

    def _api_versions_unsupported(self, corr: int, listener: str) -> list[Buffer]:
        """Kafka answers an ApiVersions version it doesn't know with a v0 response."""
        from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse

        resp = ApiVersionsResponse(
            error_code=ErrorCode.unsupported_version,
            api_keys=tuple(
                ApiVersion(api_key=k, min_version=lo, max_version=hi)  # type: ignore[arg-type]
                for k, (lo, hi) in sorted(self.supported_versions(listener).items())
            ),
        )
        return [encode_response_header(corr, 0), body_bytes(resp)]
