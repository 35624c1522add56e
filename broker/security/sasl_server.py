"""The SASL side of one broker connection: which mechanisms a listener offers, the state of the
handshake, and the exchange with the chosen mechanism.

States, as in Kafka's SaslServerAuthenticator (v1 framing only: SaslHandshake v0's unframed
tokens were removed in Kafka 4.0 and are not served): HANDSHAKE (ApiVersions and SaslHandshake
allowed) -> AUTHENTICATE (SaslAuthenticate only) -> COMPLETE (every request; the principal is
``User:<name>``) or FAILED (the connection is closed after the error response).
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

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    def allows(self, api_key: int) -> bool:
        """May a request with ``api_key`` be served in the current state?"""
        if self.state is State.COMPLETE:
            return True
        if self.state is State.HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state is State.AUTHENTICATE:
            return api_key == SASL_AUTHENTICATE
        return False

    def handshake(self, mechanism: str) -> bool:
        """Pick ``mechanism``; False (and FAILED) when this listener does not offer it."""
        if mechanism not in self.config.mechanisms:
            self.state = State.FAILED
            return False
        self.mechanism = mechanism
        if mechanism in scram.MECHANISMS:
            self._scram = scram.ScramServer(scram.MECHANISMS[mechanism], self._scram_lookup)
        self.state = State.AUTHENTICATE
        return True

    def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate step; the server's reply. AuthenticationFailed ends the session."""
        try:
            if self.mechanism == PLAIN:
                self.username = plain.authenticate(token, self.config.plain_users)
                self.state = State.COMPLETE
                return b""
            server = self._scram
            assert server is not None
            reply = server.evaluate(token)
            if server.complete:
                self.username = server.username
                self.state = State.COMPLETE
            return reply
        except AuthenticationFailed:
            self.state = State.FAILED
            raise
