"""Each listener's TLS context and SASL offer, built once at start-up from the broker config.

SSL / SASL_SSL listeners get a server TLS context (tls.py); SASL_PLAINTEXT / SASL_SSL listeners
get their ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and, for PLAIN, the
``user_<name>="<password>"`` entries of the listener's PlainLoginModule JAAS config. SCRAM
credentials live in the metadata log (AlterUserScramCredentials), not in the config.
"""

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from broker.config.server_config import ServerConfig

from .errors import SecurityConfigError
from .jaas import PLAIN_MODULE, JaasError, plain_users, single_module
from .principal_rules import DEFAULT_RULES, MappingRulesError, Rule, parse_rules
from .sasl_server import PLAIN, SUPPORTED, SaslListenerConfig
from .settings import ListenerSettings
from .tls import server_context


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslListenerConfig | None = None
    # ssl.principal.mapping.rules: a client certificate's subject DN -> the principal's name
    principal_rules: tuple[Rule, ...] = DEFAULT_RULES


def settings_for(config: ServerConfig, listener: str) -> ListenerSettings:
    return ListenerSettings(listener, config.static_values, config.listener_values)


def _sasl(settings: ListenerSettings) -> SaslListenerConfig:
    key = "sasl.enabled.mechanisms"
    mechanisms = tuple(
        dict.fromkeys(m.strip().upper() for m in (settings.get(key) or "").split(",") if m.strip())
    )
    if not mechanisms:
        raise SecurityConfigError(
            settings.name(key), "a SASL listener needs at least one mechanism"
        )
    for m in mechanisms:
        if m not in SUPPORTED:
            raise SecurityConfigError(
                settings.name(key),
                f"{m} is not supported (supported: {', '.join(SUPPORTED)})"
                + ("; Kafka's default GSSAPI must be replaced" if m == "GSSAPI" else ""),
            )
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        found = settings.jaas(PLAIN)
        want = f"{settings.prefix}plain.sasl.jaas.config"
        if found is None:
            raise SecurityConfigError(
                want, f"PLAIN is enabled but no JAAS config lists its users ({PLAIN_MODULE})"
            )
        jaas_key, text = found
        try:
            module = single_module(text)
        except JaasError as e:
            raise SecurityConfigError(jaas_key, str(e)) from None
        if module.name != PLAIN_MODULE:
            raise SecurityConfigError(jaas_key, f"PLAIN needs {PLAIN_MODULE}, found {module.name}")
        users = plain_users(module)
        if not users:
            raise SecurityConfigError(jaas_key, 'lists no users (user_<name>="<password>" entries)')
    return SaslListenerConfig(mechanisms, users, _reauth_ms(settings))


def _reauth_ms(settings: ListenerSettings) -> int:
    key = "connections.max.reauth.ms"
    raw = (settings.get(key) or "0").strip()
    try:
        value = int(raw)
    except ValueError:
        raise SecurityConfigError(settings.name(key), f"{raw!r} is not an integer") from None
    if value < 0:
        raise SecurityConfigError(
            settings.name(key), "must be at least 0 (0: no re-authentication)"
        )
    return value


def _rules(settings: ListenerSettings) -> tuple[Rule, ...]:
    key = "ssl.principal.mapping.rules"
    try:
        return parse_rules(settings.get(key) or "DEFAULT")
    except MappingRulesError as e:
        raise SecurityConfigError(settings.name(key), str(e)) from None


def build_listener_security(config: ServerConfig) -> Mapping[str, ListenerSecurity]:
    """Listener name -> its security; SecurityConfigError names the offending key."""
    out: dict[str, ListenerSecurity] = {}
    for lst in config.listeners:
        proto = lst.security_protocol
        settings = settings_for(config, lst.name)
        ctx = server_context(settings) if proto in ("SSL", "SASL_SSL") else None
        sasl = _sasl(settings) if proto.startswith("SASL_") else None
        out[lst.name] = ListenerSecurity(lst.name, proto, ctx, sasl, _rules(settings))
    return out
