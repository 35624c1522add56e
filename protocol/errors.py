"""Protocol-level exceptions and the error codes kio's ``ErrorCode`` enum lacks.

kio's enum stops at Kafka's own codes; the KIP-1279 codes (134-146) are defined here as plain
ints so they can be put on the wire through int16 fields of our generated types.
"""

from enum import IntEnum


class ProtocolError(Exception):
    """Base of every error the codec raises for bad input."""


class FrameError(ProtocolError):
    """A size prefix is negative or larger than the configured maximum."""


class TruncatedError(ProtocolError):
    """The buffer ends before the structure it should contain."""


class DecodeError(ProtocolError):
    """Bytes that cannot be decoded as the expected structure."""


class RequestError(ProtocolError):
    """A request whose header could be read but which cannot be served as sent.

    Carries what the server needs to answer instead of just closing the connection: the api key,
    version and correlation id (and the client id when the header parsed fully).
    """

    def __init__(
        self,
        message: str,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class UnknownApiKeyError(RequestError):
    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unknown api key {api_key}", api_key, api_version, correlation_id)


class UnsupportedVersionError(RequestError):
    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, lo: int, hi: int, name: str = ""
    ) -> None:
        label = f"{name} (api key {api_key})" if name else f"api key {api_key}"
        super().__init__(
            f"{label} version {api_version} is not supported (supported: {lo}-{hi})",
            api_key,
            api_version,
            correlation_id,
        )
        self.min_version = lo
        self.max_version = hi


class RequestBodyError(RequestError):
    """The header parsed but the body did not: answered with an error response, per Kafka."""


class CorruptRecordError(ProtocolError):
    """A record batch fails validation (size, magic, CRC32C, ...)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        # Byte position of the failing batch in the scanned buffer, when known.
        self.position = offset


class UnknownErrorCode(int):
    """An error code no enum here knows (a newer peer's). Has ``.value`` like an enum member, so
    kio's writer, which reads ``error_code.value``, can still write it back."""

    @property
    def value(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return f"UnknownErrorCode({int(self)})"


class MirrorErrorCode(IntEnum):
    """KIP-1279 error codes, shared with the prototype."""

    READ_ONLY_TOPIC = 134
    INVALID_MIRROR_NAME = 135
    MIRROR_ALREADY_EXISTS = 136
    UNKNOWN_MIRROR = 137
    TOPIC_ALREADY_IN_MIRROR = 138
    TOPIC_NOT_IN_MIRROR = 139
    MIRROR_TOPIC_ALREADY_PAUSED = 140
    MIRROR_TOPIC_NOT_PAUSED = 141
    MIRROR_TOPIC_BEING_REMOVED = 142
    MIRROR_NOT_EMPTY = 143
    MIRROR_AUTHORIZATION_FAILED = 144
    INVALID_MIRROR_STATES = 145
    MIRROR_TOPIC_NOT_STOPPED = 146
