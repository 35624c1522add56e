"""Envelope (api key 58) v0, on the controller: serve an admin request a broker forwarded.

The envelope carries a client's request (header and body, as the client sent it to the broker),
the client's principal (`broker.security.principal_data`) and address. The controller serves
the request with its normal handler, as if that client had sent it, and returns the response
(header and body) inside the EnvelopeResponse. As Kafka's ControllerApis and EnvelopeUtils:

- Envelope is served on controller listeners only; on another listener Kafka has not enabled the
  API, and it closes the connection;
- the sender (the broker) needs CLUSTER_ACTION on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
- a node that is not the active controller (or stops being it while serving: the quorum refuses
  the append) answers NOT_CONTROLLER, so the broker finds the new controller and sends it again;
- a principal that cannot be read: PRINCIPAL_DESERIALIZATION_FAILURE; a client address that is
  not 4 or 16 bytes: INVALID_REQUEST;
- an embedded header or body that cannot be read, or a version not served: UNSUPPORTED_VERSION
  (Kafka's choice, so the broker can tell it from a bad envelope: it closes its client's
  connection);
- an embedded API that is not forwarded (`FORWARDED_APIS`): INVALID_REQUEST;
- an embedded response that reports NOT_CONTROLLER anywhere (for DescribeQuorum:
  NOT_LEADER_OR_FOLLOWER): the envelope says NOT_CONTROLLER and carries no response, as Kafka's
  RequestChannel does;
- a handler that fails: UNKNOWN_SERVER_ERROR.

Forwarded requests are never forwarded again: the embedded dispatch skips the forwarding hook.
"""

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import ProtocolError, RequestError
from protocol.headers import RequestHeader, parse_request_header
from protocol.registry import REGISTRY, Registry

from ..quorum.driver import NotLeaderError
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from ..security.principal_data import PrincipalDataError, deserialize_principal
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api
from .forwarding import ENVELOPE, FORWARDED_APIS

log = logging.getLogger(__name__)

NOT_CONTROLLER: Final = int(ErrorCode.not_controller)
DESCRIBE_QUORUM: Final = 55
NOT_LEADER_OR_FOLLOWER: Final = int(ErrorCode.not_leader_or_follower)

CtxFactory = Callable[[RequestHeader], RequestContext]
# Serves one embedded request frame: its response (header + body) and the error codes in it
# (`Dispatcher.handle_embedded`). Raises `RequestError` for a request it cannot parse or serve.
EmbeddedHandler = Callable[[CtxFactory, memoryview], Awaitable[tuple[bytes, Mapping[int, int]]]]


class EnvelopeNotEnabledError(ProtocolError):
    """An Envelope on a listener that does not serve it: the connection is closed."""


def client_address(raw: bytes) -> str:
    """The text form of a forwarded client address (Java's ``InetAddress.getByAddress``)."""
    if len(raw) not in (4, 16):
        raise ValueError(f"a client address has 4 or 16 bytes, not {len(raw)}")
    addr = ipaddress.ip_address(raw)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # Java reads a v4-mapped address as the v4 one
    return str(addr)


class EnvelopeApi:
    def __init__(
        self,
        serve_embedded: EmbeddedHandler,
        controller_listeners: Collection[str],
        authorizer: Authorizer | None,
        is_active_controller: Callable[[], bool] = lambda: True,
        registry: Registry = REGISTRY,
    ) -> None:
        self._serve = serve_embedded
        self._is_active_controller = is_active_controller
        self._listeners = frozenset(controller_listeners)
        self._authorizer = authorizer
        self._registry = registry

    def apis(self) -> list[Api]:
        return [Api(ENVELOPE, self.handle, max_version=0)]

    def _response(self, code: ErrorCode, data: bytes | None = None) -> Any:
        return build(
            self._registry.spec(ENVELOPE).response_type(0),
            {"error_code": code, "response_data": data},
        )

    async def handle(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.listener not in self._listeners:
            raise EnvelopeNotEnabledError(
                f"Envelope from {ctx.peer_host} on listener {ctx.listener}, which is not a "
                "controller listener"
            )
        if not cluster_allowed(self._authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return self._response(ErrorCode.cluster_authorization_failed)
        if not self._is_active_controller():
            return self._response(ErrorCode.not_controller)
        try:
            if req.request_principal is None:
                raise PrincipalDataError("no principal in the envelope")
            principal = deserialize_principal(req.request_principal)
        except PrincipalDataError as e:
            log.info("Envelope from %s: %s", ctx.principal, e)
            return self._response(ErrorCode.principal_deserialization_failure)
        try:
            peer_host = client_address(req.client_host_address)
        except ValueError as e:
            log.info("Envelope from %s: %s", ctx.principal, e)
            return self._response(ErrorCode.invalid_request)
        frame = memoryview(req.request_data)
        try:
            header, _ = parse_request_header(frame, self._registry.request_header_version)
        except ProtocolError as e:
            log.info("Envelope from %s: embedded request header: %s", ctx.principal, e)
            return self._response(ErrorCode.unsupported_version)
        if header.api_key not in FORWARDED_APIS:
            log.info("Envelope from %s: api key %d is not forwarded", ctx.principal, header.api_key)
            return self._response(ErrorCode.invalid_request)

        def embedded_ctx(h: RequestHeader) -> RequestContext:
            return RequestContext(
                header=h,
                connection_id=ctx.connection_id,
                listener=ctx.listener,
                peer_host=peer_host,
                principal=principal,
                now_ms=ctx.now_ms,
            )

        try:
            payload, errors = await self._serve(embedded_ctx, frame)
        except RequestError as e:
            log.info("Envelope from %s: embedded request: %s", ctx.principal, e)
            return self._response(ErrorCode.unsupported_version)
        except NotLeaderError:
            return self._response(ErrorCode.not_controller)
        except Exception:
            log.exception("forwarded api key %d from %s failed", header.api_key, principal)
            return self._response(ErrorCode.unknown_server_error)
        if errors.get(NOT_CONTROLLER) or (
            header.api_key == DESCRIBE_QUORUM and errors.get(NOT_LEADER_OR_FOLLOWER)
        ):
            return self._response(ErrorCode.not_controller)
        return self._response(ErrorCode.none, payload)
