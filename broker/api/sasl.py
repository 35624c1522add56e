"""SaslHandshake v1 and SaslAuthenticate v0-v2, and the per-connection SASL gate.

On a SASL_PLAINTEXT / SASL_SSL listener a connection must authenticate before anything else:
ApiVersions and SaslHandshake, then SaslAuthenticate only (one round for PLAIN, two for SCRAM);
any other request closes the connection, as Kafka does. An unsupported mechanism gets
UNSUPPORTED_SASL_MECHANISM with the enabled list, a failed exchange SASL_AUTHENTICATION_FAILED
with a message; both then close the connection. On other listeners both RPCs answer
ILLEGAL_SASL_STATE, and once authenticated too, unless ``connections.max.reauth.ms`` is set:
then SaslAuthenticate v1+ tells the client its ``session_lifetime_ms``, the client authenticates
again on the connection before it ends (KIP-368), and a connection that goes on with an expired
session is closed (see `SaslSession`). SaslHandshake v0 (unframed tokens) was removed in Kafka 4.0 and is
not served: a v0 request is an unsupported version and closes the connection.

The connection's principal: ``User:<name>`` after SASL; ``User:<subject DN>`` for a verified
TLS client certificate on an SSL listener; ``User:ANONYMOUS`` otherwise.
"""

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..security import principal as principals
from ..security.errors import AuthenticationFailed
from ..security.listeners import ListenerSecurity
from ..security.sasl_server import SaslSession, ScramLookup, State
from .context import RequestContext
from .dispatcher import Api

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SESSION_KEY: Final = "sasl"  # ConnectionContext.state / RequestContext.session keys
PRINCIPAL_KEY: Final = "principal"


class SaslApi:
    def __init__(
        self,
        listeners: Mapping[str, ListenerSecurity],
        scram: ScramLookup,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listeners = listeners
        self._scram = scram
        self._monotonic = monotonic

    # -- the gate, called by the composition root for every request ----------------------

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(17, self.handshake, min_version=1, max_version=1),  # v0 (unframed): removed in 4.0
            Api(36, self.authenticate, max_version=2),
        ]

    def admit(self, state: dict[str, Any], listener: str, api_key: int, peer_cert: Any) -> bool:
        """May this request be served? False: close the connection without an answer."""
        session = state.get(SESSION_KEY)
        if session is None and PRINCIPAL_KEY not in state:
            sec = self._listeners.get(listener)
            if sec is not None and sec.sasl is not None:
                session = state[SESSION_KEY] = SaslSession(sec.sasl, self._scram)
                state[PRINCIPAL_KEY] = principals.ANONYMOUS
            else:
                rules = sec.principal_rules if sec is not None else principals.DEFAULT_RULES
                who = principals.from_peer_certificate(peer_cert, rules)
                if who is None:
                    log.info(
                        "listener %s: no ssl.principal.mapping.rules rule maps the client "
                        "certificate %s: connection closed",
                        listener,
                        principals.subject_dn(peer_cert["subject"]),
                    )
                    return False
                state[PRINCIPAL_KEY] = who
        return session is None or session.allows(api_key, self._monotonic())

    @staticmethod
    def authenticated(state: dict[str, Any]) -> bool:
        """Has this connection completed SASL authentication?"""
        session = state.get(SESSION_KEY)
        return session is not None and session.authenticated

    @staticmethod
    def reauthenticating(state: dict[str, Any]) -> bool:
        session = state.get(SESSION_KEY)
        return session is not None and session.reauthenticating

    @staticmethod
    def should_close(state: dict[str, Any]) -> bool:
        """After a response: did the SASL exchange fail (answer, then hang up)?"""
        session = state.get(SESSION_KEY)
        return session is not None and session.state is State.FAILED

    # -- RPCs ---------------------------------------------------------------------------------

    async def handshake(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(SASL_HANDSHAKE).response_type(ctx.api_version)
        session: SaslSession | None = ctx.session.get(SESSION_KEY)
        if session is None or not (session.state is State.HANDSHAKE or session.can_reauthenticate):
            return build(cls, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})
        mechanisms = list(session.config.mechanisms)
        if not session.handshake(req.mechanism):
            log.info(
                "connection %s: SASL mechanism %r is not enabled on listener %s",
                ctx.connection_id,
                req.mechanism,
                ctx.listener,
            )
            code = ErrorCode.unsupported_sasl_mechanism
            return build(cls, {"error_code": code, "mechanisms": mechanisms})
        return build(cls, {"error_code": ErrorCode.none, "mechanisms": mechanisms})

    async def authenticate(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(SASL_AUTHENTICATE).response_type(ctx.api_version)
        session: SaslSession | None = ctx.session.get(SESSION_KEY)
        if session is None or session.state is not State.AUTHENTICATE:
            why = (
                "SaslAuthenticate request received after successful authentication"
                if session is None or session.authenticated
                else "Unexpected SaslAuthenticate request"
            )
            return build(cls, {"error_code": ErrorCode.illegal_sasl_state, "error_message": why})
        try:
            reply = session.authenticate(bytes(req.auth_bytes), self._monotonic())
        except AuthenticationFailed as e:
            log.info(
                "connection %s: SASL/%s authentication failed: %s",
                ctx.connection_id,
                session.mechanism,
                e,
            )
            return build(
                cls,
                {
                    "error_code": ErrorCode.sasl_authentication_failed,
                    "error_message": e.client_message,
                    "auth_bytes": b"",
                },
            )
        if session.authenticated:
            ctx.session[PRINCIPAL_KEY] = principals.user(session.username or "")
            ctx.principal = ctx.session[PRINCIPAL_KEY]
        return build(
            cls,
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "auth_bytes": reply,
                "session_lifetime": session.config.reauth_ms if session.authenticated else 0,
            },
        )
