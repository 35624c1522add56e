"""The security of this node's own connections to the other nodes, from Kafka's broker keys.

A node reaches its peers on two listeners: the controller listener (the first of
``controller.listener.names``: Raft RPCs, the controller channel, forwarding, broker
registration and heartbeats) and the inter-broker listener (replica fetchers, transaction
markers, KIP-890 verification, remote mirror and share-group states). Each connection speaks
the protocol ``listener.security.protocol.map`` gives that listener, with the listener's keys
(``listener.name.<l>.<key>`` over ``<key>``):

- TLS (SSL, SASL_SSL): ``ssl.truststore.*`` to verify the peer, its host name checked when
  ``ssl.endpoint.identification.algorithm`` is ``https`` (Kafka's default); ``ssl.keystore.*``
  is presented as this node's client certificate when the peer asks for one (mutual TLS).
- SASL: the mechanism is ``sasl.mechanism.controller.protocol`` or
  ``sasl.mechanism.inter.broker.protocol``; ``username``/``password`` come from the
  listener's JAAS config for that mechanism
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``).

This node's principal on each link (what its peers' authorizers see) is known here:
``User:<username>`` after SASL, the certificate's subject mapped by
``ssl.principal.mapping.rules`` for mutual TLS, ``User:ANONYMOUS`` otherwise.
Every problem is a `SecurityConfigError` naming the key to fix.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Final

from broker.config.server_config import ServerConfig

from . import principal as principals
from .client import ClientSecurity
from .errors import SecurityConfigError
from .jaas import PLAIN_MODULE, SCRAM_MODULE, JaasError, single_module
from .principal_rules import MappingRulesError, Rule, map_dn, parse_rules
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .settings import ListenerSettings
from .stores import key_material, pem_blocks
from .tls import CLIENT_AUTH, client_context

CONTROLLER_MECHANISM_KEY: Final = "sasl.mechanism.controller.protocol"
INTER_BROKER_MECHANISM_KEY: Final = "sasl.mechanism.inter.broker.protocol"
MAPPING_RULES_KEY: Final = "ssl.principal.mapping.rules"
_MECHANISMS: Final = ("PLAIN", *SCRAM_MECHANISMS)


@dataclass(frozen=True, slots=True)
class NodeLink:
    """How this node connects to its peers' ``listener``, and who it is there."""

    listener: str
    security: ClientSecurity = field(default_factory=ClientSecurity)
    principal: str = principals.ANONYMOUS

    def describe(self) -> str:
        """``CONTROLLER (SASL_SSL, SCRAM-SHA-512)`` for log lines."""
        what = self.security.protocol
        if self.security.mechanism:
            what += f", {self.security.mechanism}"
        return f"{self.listener} ({what})"


@dataclass(frozen=True, slots=True)
class NodeLinks:
    controller: NodeLink
    inter_broker: NodeLink
    warnings: tuple[str, ...] = ()


def settings_for(config: ServerConfig, listener: str) -> ListenerSettings:
    return ListenerSettings(listener, config.static_values, config.listener_values)


def inter_broker_listener(config: ServerConfig) -> str:
    """``inter.broker.listener.name``, else the first advertised non-controller listener."""
    if config.inter_broker_listener_name:
        return config.inter_broker_listener_name
    names = [
        a.name
        for a in config.advertised_listeners
        if a.name not in config.controller_listener_names
    ]
    return names[0] if names else ""


def mapping_rules(settings: ListenerSettings) -> tuple[Rule, ...]:
    try:
        return parse_rules(settings.get(MAPPING_RULES_KEY) or "DEFAULT")
    except MappingRulesError as e:
        raise SecurityConfigError(settings.name(MAPPING_RULES_KEY), str(e)) from None


def _mechanism(config: ServerConfig, key: str, listener: str, protocol: str) -> str:
    mechanism = (config.static_values.get(key) or "GSSAPI").strip().upper()
    if mechanism not in _MECHANISMS:
        raise SecurityConfigError(
            key,
            f"{mechanism} is not supported for this node's connections to {listener} "
            f"({protocol}): set it to one of {', '.join(_MECHANISMS)}",
        )
    return mechanism


def _credentials(settings: ListenerSettings, mechanism: str) -> tuple[str, str]:
    """This node's own username and password for ``mechanism`` on the listener."""
    found = settings.jaas(mechanism)
    want_key = f"{settings.prefix}{mechanism.lower()}.sasl.jaas.config"
    if found is None:
        raise SecurityConfigError(
            want_key,
            f"is required: this node authenticates to its peers' {settings.listener} listener "
            f"with {mechanism} and needs its own username and password there",
        )
    key, text = found
    try:
        module = single_module(text)
    except JaasError as e:
        raise SecurityConfigError(key, str(e)) from None
    want = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    if module.name != want:
        raise SecurityConfigError(key, f"{mechanism} needs {want}, found {module.name}")
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise SecurityConfigError(
            key,
            'needs username="..." and password="...": the identity this node presents to its '
            f"peers' {settings.listener} listener",
        )
    return username, password


def _certificate(settings: ListenerSettings) -> Any:
    """The keystore's own certificate (cryptography's x509.Certificate), None without one."""
    material = key_material(settings)
    if material is None:
        return None
    from cryptography import x509

    certs = [b for k, b in pem_blocks(material.pem.decode()) if k == "CERTIFICATE"]
    return x509.load_pem_x509_certificate(certs[0].encode()) if certs else None


def certificate_dn(cert: Any) -> str:
    """RFC 2253 text of the certificate's subject, as principal.subject_dn writes a peer's."""
    subject = [
        tuple((getattr(a.oid, "_name", a.oid.dotted_string), str(a.value)) for a in rdn)
        for rdn in cert.subject.rdns
    ]
    return principals.subject_dn(subject)


def certificate_hosts(cert: Any) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) the certificate holds: its SANs, else its CN as a DNS name."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return [str(a.value) for a in cns], []
    dns = [str(n) for n in san.get_values_for_type(x509.DNSName)]
    ips = [str(a) for a in san.get_values_for_type(x509.IPAddress)]
    return dns, ips


def holds_host(dns: list[str], ips: list[str], host: str) -> bool:
    """Would a TLS client checking ``host`` accept a certificate for these names?"""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        return any(ipaddress.ip_address(a) == ip for a in ips)
    host = host.lower().rstrip(".")
    for name in (n.lower().rstrip(".") for n in dns):
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False


def _link(config: ServerConfig, listener: str, mechanism_key: str) -> NodeLink:
    protocol = config.listener_security_protocol_map.get(listener, "PLAINTEXT")
    settings = settings_for(config, listener)
    tls = protocol in ("SSL", "SASL_SSL")
    ctx = client_context(settings) if tls else None
    if protocol.startswith("SASL_"):
        mechanism = _mechanism(config, mechanism_key, listener, protocol)
        username, password = _credentials(settings, mechanism)
        security = ClientSecurity(protocol, ctx, mechanism, username, password)
        return NodeLink(listener, security, principals.user(username))
    security = ClientSecurity(protocol, ctx)
    if protocol != "SSL":
        return NodeLink(listener, security)
    auth = (settings.get("ssl.client.auth") or "none").strip().lower()
    cert = _certificate(settings)
    if cert is None or CLIENT_AUTH.get(auth) is None or auth == "none":
        return NodeLink(listener, security)
    name = map_dn(mapping_rules(settings), certificate_dn(cert))
    if name is None:
        raise SecurityConfigError(
            settings.name(MAPPING_RULES_KEY),
            f"no rule maps this node's own certificate subject {certificate_dn(cert)!r}",
        )
    return NodeLink(listener, security, principals.user(name))


def _check_own_host(config: ServerConfig, link: NodeLink, host: str | None) -> None:
    """A peer that checks host names must find this node's host in its certificate."""
    if host is None or link.security.ssl_context is None:
        return
    settings = settings_for(config, link.listener)
    algo = (settings.get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algo != "https" or config.listener(link.listener) is None:
        return
    cert = _certificate(settings)
    if cert is None:
        return  # no keystore: server_context names the missing key
    dns, ips = certificate_hosts(cert)
    if not holds_host(dns, ips, host):
        held = ", ".join([*dns, *ips]) or "no host name"
        raise SecurityConfigError(
            settings.name(
                "ssl.keystore.location"
                if settings.get("ssl.keystore.location")
                else "ssl.keystore.certificate.chain"
            ),
            f"the certificate holds {held}, not {host}, the address its peers reach this "
            f"node's {link.listener} listener at (they check it: "
            f"{settings.name('ssl.endpoint.identification.algorithm')}=https)",
        )


def _check_offered(config: ServerConfig, link: NodeLink, key: str) -> None:
    """On its own listener, this node must accept the mechanism it uses with its peers."""
    mechanism = link.security.mechanism
    if mechanism is None or config.listener(link.listener) is None:
        return
    settings = settings_for(config, link.listener)
    enabled_key = "sasl.enabled.mechanisms"
    enabled = {m.strip().upper() for m in (settings.get(enabled_key) or "").split(",")}
    if mechanism not in enabled:
        raise SecurityConfigError(
            key,
            f"{mechanism} is not in {settings.name(enabled_key)} of listener {link.listener}: "
            "the nodes could not authenticate to each other",
        )


def _own_hosts(config: ServerConfig) -> tuple[str | None, str | None]:
    """(controller host, inter-broker host): where the other nodes reach this one."""
    controller = next(
        (v.host for v in config.controller_quorum_voters if v.node_id == config.node_id), None
    )
    if controller is None and not config.controller_quorum_voters and config.is_controller:
        # a dynamic quorum (KIP-853): peers reach it at its controller listener's address
        name = config.controller_listener_names[0] if config.controller_listener_names else ""
        own = [a for a in config.advertised_listeners if a.name == name]
        own += [x for x in config.listeners if x.name == name]
        controller = own[0].host if own else None
    ibl = inter_broker_listener(config)
    advertised = next((a for a in config.advertised_listeners if a.name == ibl), None)
    inter_broker = advertised.host if advertised is not None else None
    return controller, inter_broker or None


def _super_user_warnings(config: ServerConfig, links: list[NodeLink]) -> list[str]:
    if not config.authorizer_class_name:
        return []
    supers = {p.strip() for p in (config.super_users or "").split(";") if p.strip()}
    out = []
    for link in links:
        if link.principal in supers:
            continue
        out.append(
            f"super.users: lacks {link.principal}, this node's own principal on listener "
            f"{link.describe()}: the other nodes' authorizers refuse its node-to-node requests "
            "unless an ACL grants it CLUSTER_ACTION on the cluster"
        )
    return out


def alone(config: ServerConfig) -> bool:
    """A cluster of one node (it talks to itself in process: no node links to secure). A
    dynamic quorum (KIP-853, no static voters) never is: controllers may join it."""
    if not config.controller_quorum_voters:
        return False
    return {v.node_id for v in config.controller_quorum_voters} <= {config.node_id}


def build_node_links(config: ServerConfig) -> NodeLinks:
    """This node's links to its peers; SecurityConfigError names the key to fix."""
    if alone(config):
        return NodeLinks(NodeLink(""), NodeLink(""))
    controller_name = (
        config.controller_listener_names[0] if config.controller_listener_names else ""
    )
    controller = _link(config, controller_name, CONTROLLER_MECHANISM_KEY)
    ibl = inter_broker_listener(config)
    inter_broker = (
        _link(config, ibl, INTER_BROKER_MECHANISM_KEY)
        if config.is_broker and ibl
        else NodeLink(ibl)
    )
    controller_host, broker_host = _own_hosts(config)
    if config.is_controller:
        _check_own_host(config, controller, controller_host)
        _check_offered(config, controller, CONTROLLER_MECHANISM_KEY)
    used = [controller]
    if config.is_broker and ibl:
        _check_own_host(config, inter_broker, broker_host)
        _check_offered(config, inter_broker, INTER_BROKER_MECHANISM_KEY)
        if inter_broker.principal != controller.principal:
            used.append(inter_broker)
    return NodeLinks(controller, inter_broker, tuple(_super_user_warnings(config, used)))
