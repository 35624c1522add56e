"""The SASL side of one broker connection: which mechanisms a listener offers, the state of the
handshake, and the exchange with the chosen mechanism.

States, as in Kafka's SaslServerAuthenticator (v1 framing only: SaslHandshake v0's unframed
tokens were removed in Kafka 4.0 and are not served): HANDSHAKE (ApiVersions and SaslHandshake
allowed) -> AUTHENTICATE (SaslAuthenticate only) -> COMPLETE (every request; the principal is
``User:<name>``) or FAILED (the connection is closed after the error response).

Re-authentication (KIP-368, ``connections.max.reauth.ms`` > 0): a session completed at time t
expires at t + the limit. Before then the client sends SaslHandshake (the same mechanism) and
SaslAuthenticate again on the connection, as the same user, and its session starts over; its
other requests are served meanwhile. After expiry only those two are; anything else closes the
connection (clients that cannot re-authenticate included).
"""

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from . import plain, scram
from .errors import AuthenticationFailed

PLAIN: Final = "PLAIN"
SUPPORTED: Final = (PLAIN, *scram.MECHANISMS)
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class State(enum.Enum):
    HANDSHAKE = 1
    AUTHENTICATE = 2
    COMPLETE = 3
    FAILED = 4


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    """What a SASL listener offers: enabled mechanisms (in order) and PLAIN's JAAS users."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    reauth_ms: int = 0  # connections.max.reauth.ms: a session's lifetime (0: for ever)


ScramLookup = Callable[[str, scram.Mechanism], scram.Credential | None]


class SaslSession:
    """Kept in the connection's state; driven by the SaslHandshake/SaslAuthenticate handlers."""

    def __init__(self, config: SaslListenerConfig, scram_lookup: ScramLookup) -> None:
        self.config = config
        self._scram_lookup = scram_lookup
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.username: str | None = None
        self._scram: scram.ScramServer | None = None
        self.expires_at: float | None = None  # the session's end (the caller's clock)
        self.reauthenticating = False  # a completed session is authenticating again

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    def allows(self, api_key: int, now: float = 0.0) -> bool:
        """May a request with ``api_key`` be served in the current state (at ``now``)?"""
        if self.state is State.COMPLETE or (
            self.reauthenticating and self.state is State.AUTHENTICATE
        ):
            if self.expires_at is not None and now >= self.expires_at:
                return api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE)  # re-authenticate, or go
            return True
        if self.state is State.HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state is State.AUTHENTICATE:
            return api_key == SASL_AUTHENTICATE
        return False

    @property
    def can_reauthenticate(self) -> bool:
        return self.state is State.COMPLETE and self.config.reauth_ms > 0

    def handshake(self, mechanism: str) -> bool:
        """Pick ``mechanism``; False (and FAILED) when this listener does not offer it, or when
        a re-authentication asks for another mechanism than the session's."""
        if self.state is State.COMPLETE:
            self.reauthenticating = True
            if mechanism != self.mechanism:
                self.state = State.FAILED
                return False
        if mechanism not in self.config.mechanisms:
            self.state = State.FAILED
            return False
        self.mechanism = mechanism
        if mechanism in scram.MECHANISMS:
            self._scram = scram.ScramServer(scram.MECHANISMS[mechanism], self._scram_lookup)
        self.state = State.AUTHENTICATE
        return True

    def authenticate(self, token: bytes, now: float = 0.0) -> bytes:
        """One SaslAuthenticate step; the server's reply. AuthenticationFailed ends the session.
        ``now``: when a completed session starts (its expiry counts from it)."""
        try:
            if self.mechanism == PLAIN:
                self._complete(plain.authenticate(token, self.config.plain_users), now)
                return b""
            server = self._scram
            assert server is not None
            reply = server.evaluate(token)
            if server.complete:
                self._complete(server.username, now)
            return reply
        except AuthenticationFailed:
            self.state = State.FAILED
            raise

    def _complete(self, username: str | None, now: float) -> None:
        if self.reauthenticating and username != self.username:
            raise AuthenticationFailed(
                f"re-authentication as {username!r} on a session of {self.username!r}",
                "Cannot change principals during re-authentication",
            )
        self.username = username
        self.state = State.COMPLETE
        self.reauthenticating = False
        reauth_ms = self.config.reauth_ms
        self.expires_at = now + reauth_ms / 1000 if reauth_ms > 0 else None
