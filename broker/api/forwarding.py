"""Admin requests sent to any node are served by the active controller (Kafka's ForwardingManager).

A broker that is not the active controller does not run the handler of a request in
`FORWARDED_APIS`: it wraps the request frame as the client sent it (header and body) in an
Envelope (api key 58) with the client's principal (`broker.security.principal_data`) and
address, sends it over the `ControllerChannel`, and answers the client with the response the
controller put in the envelope, body bytes unchanged, under the client's correlation id.

How it fails, as Kafka's broker does:

- no controller answered within the channel's timeout: the API's own error response
  (`error_response`) with REQUEST_TIMED_OUT for everything asked;
- the envelope comes back with UNSUPPORTED_VERSION (the controller cannot read this version of
  the request): the client's connection is closed, so it reconnects and negotiates again;
- any other envelope error, an empty or unreadable embedded response, or no Envelope version in
  common with the controller: UNKNOWN_SERVER_ERROR (the broker is misconfigured, not the client).

The active controller (a combined node that leads the quorum) serves these requests itself, and
so does any node for a request that came on one of its controller listeners: as Kafka's
ControllerApis, a controller answers what is sent to it (NOT_CONTROLLER when it is not the active
one; `--bootstrap-controller` clients find the active controller themselves).
"""

import ipaddress
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import ProtocolError
from protocol.headers import encode_response_header, parse_response_header
from protocol.readers import Buffer
from protocol.registry import REGISTRY, Registry, body_bytes, decode_body

from ..network.errors import UnsupportedVersionError as NoCommonVersionError
from ..security.principal_data import serialize_principal
from .context import RequestContext
from .error_counts import error_counts
from .error_response import error_response

log = logging.getLogger(__name__)

ENVELOPE: Final = 58

# The requests a broker forwards to the active controller: Kafka's (ApiKeys with
# forwardable=true that this broker serves or may serve) and the KIP-1279 mirror RPCs the KIP
# routes to the controller (it writes their records); ListMirrors/DescribeMirrors and the
# mirror-state RPCs are served by brokers. The Envelope handler accepts these and no others.
FORWARDED_APIS: Final[frozenset[int]] = frozenset(
    {
        19,  # CreateTopics
        20,  # DeleteTopics
        30,  # CreateAcls
        31,  # DeleteAcls
        33,  # AlterConfigs
        37,  # CreatePartitions
        43,  # ElectLeaders
        44,  # IncrementalAlterConfigs
        45,  # AlterPartitionReassignments
        46,  # ListPartitionReassignments
        49,  # AlterClientQuotas
        51,  # AlterUserScramCredentials
        55,  # DescribeQuorum (kafka-metadata-quorum.sh --bootstrap-server <any broker>)
        57,  # UpdateFeatures
        64,  # UnregisterBroker
        94,  # CreateMirror
        95,  # AddTopicsToMirror
        96,  # RemoveTopicsFromMirror
        102,  # PauseMirrorTopics
        103,  # ResumeMirrorTopics
        104,  # DeleteMirror
        105,  # BumpLeaderEpochs ("bump the leader epoch on the destination controller")
    }
)

# The forwarded APIs that write through the quorum: on a controller listener of a controller
# that is not the active one, Kafka's QuorumController answers them NOT_CONTROLLER at once (the
# client then finds the active controller). ListPartitionReassignments and DescribeQuorum read.
CONTROLLER_WRITES: Final[frozenset[int]] = FORWARDED_APIS - {46, 55}

_NO_ADDRESS: Final = bytes(4)  # 0.0.0.0: a peer that is not an IP address (tests, unix sockets)

# The response payload for the client (header included) and the error codes in it.
ForwardedResponse = tuple[list[Buffer], Mapping[int, int] | None]


class ControllerRequests(Protocol):
    """What the forwarder needs of `broker.quorum.controller_channel.ControllerChannel`."""

    timeout_ms: int

    async def request(self, api_key: int, body: Any, version: int | None = None) -> Any: ...


class ForwardingVersionError(ProtocolError):
    """The controller cannot read the request's version: the client's connection is closed."""


def client_address_bytes(host: str) -> bytes:
    """The client's address as Java's ``InetAddress.getAddress()``: 4 or 16 bytes."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).packed
    except ValueError:
        return _NO_ADDRESS


class Forwarder:
    def __init__(
        self,
        channel: ControllerRequests,
        is_active_controller: Callable[[], bool],
        *,
        controller_listeners: Collection[str] = (),
        serialize: Callable[[str], bytes] = serialize_principal,
        registry: Registry = REGISTRY,
    ) -> None:
        self._channel = channel
        self._is_active_controller = is_active_controller
        self._controller_listeners = frozenset(controller_listeners)
        self._serialize = serialize
        self._registry = registry
        self.api_keys: frozenset[int] = FORWARDED_APIS

    async def forward(
        self, ctx: RequestContext, frame: memoryview, request: Any
    ) -> ForwardedResponse | None:
        """The controller's response to this request, or None: serve it here (this node is the
        active controller, or the request came on a controller listener). ``frame`` is the request as received, ``request`` its decoded body
        (for the error response when the controller cannot be reached)."""
        if ctx.listener in self._controller_listeners or self._is_active_controller():
            return None
        header = ctx.header
        key, version = header.api_key, header.api_version
        spec = self._registry.spec(key)
        envelope: Any = build(
            self._registry.spec(ENVELOPE).request_type(0),
            {
                "request_data": bytes(frame),
                "request_principal": self._serialize(ctx.principal),
                "client_host_address": client_address_bytes(ctx.peer_host),
            },
        )
        try:
            answer = await self._channel.request(ENVELOPE, envelope)
        except TimeoutError as e:
            log.info("forwarding %s from %r: %s", spec.name, ctx.client_id, e)
            message = f"The active controller did not answer within {self._channel.timeout_ms} ms"
            return self._error(ctx, request, ErrorCode.request_timed_out, message)
        except NoCommonVersionError as e:
            log.warning("cannot forward %s to the controller: %s", spec.name, e)
            return self._error(ctx, request, ErrorCode.unknown_server_error, None)
        code = int(answer.error_code)
        if code == ErrorCode.unsupported_version:
            raise ForwardingVersionError(
                f"the active controller cannot serve {spec.name} v{version} forwarded for "
                f"client {ctx.client_id!r}"
            )
        if code != ErrorCode.none or answer.response_data is None:
            log.warning("forwarded %s failed: envelope error %d", spec.name, code)
            return self._error(ctx, request, ErrorCode.unknown_server_error, None)
        data = memoryview(answer.response_data)
        header_version = spec.response_header_version(version)
        try:
            _, pos = parse_response_header(data, header_version)
            body = decode_body(spec.response_type(version), data, pos)
        except ProtocolError as e:
            log.error("unreadable %s v%d response from the controller: %s", spec.name, version, e)
            return self._error(ctx, request, ErrorCode.unknown_server_error, None)
        # the controller's body bytes as they are, under the client's correlation id
        parts: list[Buffer] = [
            encode_response_header(header.correlation_id, header_version),
            data[pos:],
        ]
        return parts, error_counts(body)

    def _error(
        self, ctx: RequestContext, request: Any, code: ErrorCode, message: str | None
    ) -> ForwardedResponse:
        header = ctx.header
        key, version = header.api_key, header.api_version
        resp = error_response(key, version, request, code, message, self._registry)
        hv = self._registry.spec(key).response_header_version(version)
        return [encode_response_header(header.correlation_id, hv), body_bytes(resp)], error_counts(
            resp
        )
