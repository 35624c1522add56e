"""Errors the client side raises. The server never raises to its callers; it closes connections."""


class NetworkError(Exception):
    """Base of the client-side network errors."""


class ConnectError(NetworkError):
    """Could not establish (or negotiate) a connection."""


class ConnectionClosedError(NetworkError):
    """The connection closed while a request was waiting, or before it was sent."""


class RequestTimeoutError(NetworkError):
    """No response within the request timeout; the connection is closed (a Kafka stream can't
    resynchronise after a lost response)."""


class UnsupportedVersionError(NetworkError):
    """The server and this client have no version of an API in common."""

    def __init__(self, message: str, api_key: int) -> None:
        super().__init__(message)
        self.api_key = api_key


class ProtocolViolationError(NetworkError):
    """The peer sent bytes that break the protocol (bad frame size, unknown correlation id)."""
