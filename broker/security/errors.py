"""Errors raised while reading security settings or authenticating."""


class SecurityConfigError(ValueError):
    """A TLS/SASL setting is unusable; the message names the config key."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: {why}")
        self.key = key
        self.why = why


class AuthenticationFailed(Exception):
    """A SASL exchange failed. ``str(e)`` is the detail for the log; ``client_message`` is what
    the client is told (Kafka hides SCRAM's details behind a generic message)."""

    def __init__(self, detail: str, client_message: str | None = None) -> None:
        super().__init__(detail)
        self.client_message = client_message if client_message is not None else detail
