"""Client-side security from Kafka client keys (a mirror's source configs, a --command-config):
``security.protocol``, ``ssl.*`` (tls.client_context), ``sasl.mechanism`` and ``sasl.jaas.config``
(PlainLoginModule / ScramLoginModule with ``username`` and ``password``).

`ClientSecurity.authenticate` runs SaslHandshake v1 + SaslAuthenticate over a freshly negotiated
`broker.network.client.ClientConnection`; the network layer calls it before any other request.
"""

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from protocol.build import build

from . import plain, scram
from .errors import AuthenticationFailed, SecurityConfigError
from .jaas import PLAIN_MODULE, SCRAM_MODULE, JaasError, single_module
from .settings import MapSettings
from .tls import client_context

SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("PLAIN", *scram.MECHANISMS)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def uses_sasl(self) -> bool:
        return self.mechanism is not None

    async def authenticate(self, conn: Any) -> None:
        """SASL over ``conn`` (a negotiated ClientConnection); AuthenticationFailed on refusal."""
        mechanism = self.mechanism
        if mechanism is None:
            return
        version = conn.version_for(SASL_HANDSHAKE)
        if version < 1:
            raise AuthenticationFailed(
                f"{conn.host}:{conn.port} offers only SaslHandshake v0 (unframed SASL), "
                "which is not supported"
            )
        spec = conn.registry.spec(SASL_HANDSHAKE)
        resp = await conn.send(build(spec.request_type(version), {"mechanism": mechanism}))
        code = int(getattr(resp.error_code, "value", resp.error_code))
        if code:
            raise AuthenticationFailed(
                f"SASL mechanism {mechanism} is not enabled on {conn.host}:{conn.port} "
                f"(enabled: {', '.join(resp.mechanisms) or 'none'})"
            )
        if mechanism == "PLAIN":
            await self._step(conn, plain.client_message(self.username, self.password))
            return
        client = scram.ScramClient(scram.MECHANISMS[mechanism], self.username, self.password)
        server_first = await self._step(conn, client.first())
        server_final = await self._step(conn, client.final(server_first))
        client.verify(server_final)

    @staticmethod
    async def _step(conn: Any, token: bytes) -> bytes:
        version = conn.version_for(SASL_AUTHENTICATE)
        spec = conn.registry.spec(SASL_AUTHENTICATE)
        resp = await conn.send(build(spec.request_type(version), {"auth_bytes": token}))
        code = int(getattr(resp.error_code, "value", resp.error_code))
        if code:
            raise AuthenticationFailed(
                f"SASL authentication to {conn.host}:{conn.port} failed: "
                f"{resp.error_message or f'error code {code}'}"
            )
        return bytes(resp.auth_bytes)


def client_security(config: Mapping[str, str], label: str = "") -> ClientSecurity:
    """Read the client keys; SecurityConfigError names the bad key (prefixed with ``label``)."""
    settings = MapSettings(config, label)
    protocol = (config.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(
            settings.name("security.protocol"),
            f"unknown protocol {protocol} (expected one of {', '.join(PROTOCOLS)})",
        )
    ctx = client_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, ctx)
    mechanism = (config.get("sasl.mechanism") or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise SecurityConfigError(
            settings.name("sasl.mechanism"),
            f"{mechanism} is not supported (supported: {', '.join(MECHANISMS)})",
        )
    jaas = config.get("sasl.jaas.config")
    if not jaas:
        raise SecurityConfigError(
            settings.name("sasl.jaas.config"), f"is required with security.protocol={protocol}"
        )
    try:
        module = single_module(jaas)
    except JaasError as e:
        raise SecurityConfigError(settings.name("sasl.jaas.config"), str(e)) from None
    want = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    if module.name != want:
        raise SecurityConfigError(
            settings.name("sasl.jaas.config"), f"{mechanism} needs {want}, found {module.name}"
        )
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise SecurityConfigError(
            settings.name("sasl.jaas.config"), 'needs username="..." and password="..."'
        )
    return ClientSecurity(protocol, ctx, mechanism, username, password)
