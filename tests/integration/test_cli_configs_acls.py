"""bin/kafka-configs.sh and bin/kafka-acls.sh as real processes against one real node (with
StandardAuthorizer, ANONYMOUS as super user), every effect checked with a stock client:
confluent-kafka's AdminClient for topics, brokers and ordinary ACLs, and kafka-python's protocol
layer for what stock admin APIs cannot name (resource type 64 mirror configs, KIP-1279's
CLUSTER_MIRROR ACLs). Covers the KIP's runbook commands (throttles, mirror config, mirror ACLs),
Kafka's bracket list syntax, the client-quota refusal and bad input (exit 1, no traceback).
"""

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    DescribeAclsRequest,
    DescribeConfigsRequest,
)

from broker.config.properties import load_properties

from .node import ROOT, Node

CONFIGS = str(ROOT / "bin" / "kafka-configs.sh")
ACLS = str(ROOT / "bin" / "kafka-acls.sh")
MIRRORS = str(ROOT / "bin" / "kafka-mirrors.sh")
MIRROR_RESOURCE, CLUSTER_MIRROR = 64, 8
ANY_PATTERN, ANY_OP, ANY_PERM, LITERAL, ALLOW = 1, 1, 1, 3, 3
CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 5, 6, 7, 8, 10, 11


class Cluster:
    def __init__(self, node: Node, admin: AdminClient, kp: Any) -> None:
        self.node, self.admin, self.kp = node, admin, kp

    def run(
        self, tool: str, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [tool, "--bootstrap-server", self.node.bootstrap, *args],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "Traceback" not in p.stderr, p.stderr
        return p

    def ok(self, tool: str, *args: str, stdin: str | None = None) -> str:
        p = self.run(tool, *args, stdin=stdin)
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p.stdout

    def fails(self, tool: str, *args: str, message: str) -> None:
        p = self.run(tool, *args)
        assert p.returncode == 1, f"{args}: expected exit 1, got {p.returncode}\n{p.stdout}"
        assert message in p.stderr, f"{args}: {message!r} not in stderr:\n{p.stderr}"

    # -- stock-client views --------------------------------------------------------------

    def configs(self, kind: ResourceType, name: str) -> dict[str, Any]:
        (future,) = self.admin.describe_configs([ConfigResource(kind, name)]).values()
        return dict(future.result(10))

    def acls(self, rtype: ResourceType, name: str | None = None) -> set[tuple[Any, ...]]:
        any_: Any = None  # confluent's stubs want str; None is "any" at runtime
        f = AclBindingFilter(
            rtype,
            name or any_,
            ResourcePatternType.ANY,
            any_,
            any_,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        return {
            (
                b.restype,
                b.name,
                b.resource_pattern_type,
                b.principal,
                b.host,
                b.operation,
                b.permission_type,
            )
            for b in self.admin.describe_acls(f).result(10)
        }

    def kp_send(self, request: Any) -> Any:
        return self.kp._manager.run(self.kp._manager.send, request)

    def mirror_configs(self, mirror: str) -> dict[str, tuple[str | None, int]]:
        """A mirror's configs over DescribeConfigs (resource type 64): name -> (value, source)."""
        resp = self.kp_send(
            DescribeConfigsRequest(
                resources=[(MIRROR_RESOURCE, mirror, None)], include_synonyms=False
            )
        )
        (r,) = resp.results
        assert r.error_code == 0, r
        return {c.name: (c.value, c.config_source) for c in r.configs}

    def mirror_acls(self, name: str | None) -> set[tuple[str, str, str, int, int]]:
        resp = self.kp_send(
            DescribeAclsRequest(
                resource_type_filter=CLUSTER_MIRROR,
                resource_name_filter=name,
                pattern_type_filter=ANY_PATTERN,
                principal_filter=None,
                host_filter=None,
                operation=ANY_OP,
                permission_type=ANY_PERM,
            )
        )
        assert resp.error_code == 0, resp
        return {
            (r.resource_name, a.principal, a.host, a.operation, a.permission_type)
            for r in resp.resources
            for a in r.acls
        }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    node = Node(
        tmp_path_factory.mktemp("cli-configs-acls") / "n1",
        authorizer__class__name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        super__users="User:ANONYMOUS",
    )
    node.start()
    kp = None
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        topics = [NewTopic("cfg-t", 2, 1), NewTopic("thr-t", 2, 1)]
        for f in admin.create_topics(topics).values():
            f.result(15)
        kp = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10_000)
        yield Cluster(node, admin, kp)
    finally:
        if kp is not None:
            kp.close()
        node.kill()


# -- kafka-configs.sh ----------------------------------------------------------------------


def test_topic_config_add_describe_delete(cluster: Cluster) -> None:
    out = cluster.ok(
        CONFIGS,
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg-t",
        "--alter",
        "--add-config",
        "retention.ms=3600000,cleanup.policy=[compact,delete]",
    )
    assert out == "Completed updating config for topic cfg-t.\n"
    seen = cluster.configs(ResourceType.TOPIC, "cfg-t")
    assert seen["retention.ms"].value == "3600000"
    assert seen["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert seen["cleanup.policy"].value == "compact,delete"

    # --topic shorthand; only the dynamic configs, with Kafka's line format
    out = cluster.ok(CONFIGS, "--topic", "cfg-t", "--describe")
    lines = out.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg-t are:"
    assert [ln.split("=", 1)[0] for ln in lines[1:]] == ["  cleanup.policy", "  retention.ms"]
    assert lines[2].startswith(
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
    )
    assert "segment.bytes" in cluster.ok(CONFIGS, "--topic", "cfg-t", "--describe", "--all")

    out = cluster.ok(
        CONFIGS,
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg-t",
        "--alter",
        "--delete-config",
        "retention.ms",
    )
    assert out == "Completed updating config for topic cfg-t.\n"
    seen = cluster.configs(ResourceType.TOPIC, "cfg-t")
    assert seen["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert seen["cleanup.policy"].value == "compact,delete"  # the other key stays


def test_topic_throttled_replicas_bracket_list(cluster: Cluster) -> None:
    """The KIP's destination throttle: a list value grouped with [...] (commas inside)."""
    out = cluster.ok(
        CONFIGS,
        "--entity-type",
        "topics",
        "--entity-name",
        "thr-t",
        "--alter",
        "--add-config",
        "mirror.replication.throttled.replicas=[0:1,1:1]",
    )
    assert out == "Completed updating config for topic thr-t.\n"
    seen = cluster.configs(ResourceType.TOPIC, "thr-t")
    assert seen["mirror.replication.throttled.replicas"].value == "0:1,1:1"
    assert "  mirror.replication.throttled.replicas=0:1,1:1 " in cluster.ok(
        CONFIGS, "--topic", "thr-t", "--describe"
    )


def test_broker_dynamic_and_default_configs(cluster: Cluster) -> None:
    out = cluster.ok(
        CONFIGS,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        "mirror.replication.throttled.rate=100000000",
    )
    assert out == "Completed updating config for broker 1.\n"
    out = cluster.ok(
        CONFIGS,
        "--entity-type",
        "brokers",
        "--entity-default",
        "--alter",
        "--add-config",
        "log.cleaner.backoff.ms=20000",
    )
    assert out == "Completed updating default config for brokers in the cluster.\n"

    seen = cluster.configs(ResourceType.BROKER, "1")
    rate = seen["mirror.replication.throttled.rate"]
    assert rate.value == "100000000"
    assert rate.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    backoff = seen["log.cleaner.backoff.ms"]
    assert backoff.value == "20000"
    assert backoff.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    out = cluster.ok(CONFIGS, "--broker", "1", "--describe")
    assert out.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  mirror.replication.throttled.rate=100000000 sensitive=false synonyms={}",
    ]
    out = cluster.ok(CONFIGS, "--broker-defaults", "--describe")
    assert out.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.backoff.ms=20000 sensitive=false synonyms={}",
    ]
    assert "doesn't exist" in cluster.ok(CONFIGS, "--broker", "7", "--describe")

    cluster.ok(
        CONFIGS, "--broker", "1", "--alter", "--delete-config", "mirror.replication.throttled.rate"
    )
    cluster.ok(CONFIGS, "--broker-defaults", "--alter", "--delete-config", "log.cleaner.backoff.ms")
    seen = cluster.configs(ResourceType.BROKER, "1")
    assert (
        seen["mirror.replication.throttled.rate"].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value
    )
    assert seen["log.cleaner.backoff.ms"].value != "20000"


def test_mirror_config_describe_and_alter(cluster: Cluster, tmp_path: Path) -> None:
    props = tmp_path / "mirror.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\n")
    assert (
        cluster.ok(MIRRORS, "--create", "--mirror", "cfg-m", "--mirror-config", str(props))
        == "Created mirror cfg-m\n"
    )

    out = cluster.ok(CONFIGS, "--entity-type", "mirrors", "--entity-name", "cfg-m", "--describe")
    assert out.splitlines()[0] == "Dynamic configs for mirror cfg-m are:"
    assert "  bootstrap.servers=127.0.0.1:1 sensitive=false" in out
    assert "mirror.groups.include" not in out  # a default, shown with --all only
    assert "  mirror.groups.include=.* " in cluster.ok(
        CONFIGS, "--entity-type", "mirrors", "--entity-name", "cfg-m", "--describe", "--all"
    )

    # the KIP's "Alter mirror configuration", plus a list value in brackets
    out = cluster.ok(
        CONFIGS,
        "--entity-type",
        "mirrors",
        "--entity-name",
        "cfg-m",
        "--alter",
        "--add-config",
        "bootstrap.servers=127.0.0.1:2,mirror.groups.include=[orders.*,pay.*]",
    )
    assert out == "Completed updating config for mirror cfg-m.\n"
    seen = cluster.mirror_configs("cfg-m")
    assert seen["bootstrap.servers"][0] == "127.0.0.1:2"
    assert seen["mirror.groups.include"][0] == "orders.*,pay.*"

    cluster.ok(CONFIGS, "--mirror", "cfg-m", "--alter", "--delete-config", "mirror.groups.include")
    assert cluster.mirror_configs("cfg-m")["mirror.groups.include"] == (".*", 5)  # default again

    # an unknown mirror key is refused by the broker and nothing changes
    cluster.fails(
        CONFIGS,
        "--mirror",
        "cfg-m",
        "--alter",
        "--add-config",
        "no.such.key=1",
        message="no.such.key",
    )
    assert "no.such.key" not in cluster.mirror_configs("cfg-m")
    assert "doesn't exist" in cluster.ok(CONFIGS, "--mirror", "no-such-mirror", "--describe")


def test_add_config_file(cluster: Cluster, tmp_path: Path) -> None:
    f = tmp_path / "topic.properties"
    f.write_text("retention.bytes=1048576\nmax.message.bytes=2000000\n")
    cluster.ok(CONFIGS, "--topic", "thr-t", "--alter", "--add-config-file", str(f))
    seen = cluster.configs(ResourceType.TOPIC, "thr-t")
    assert seen["retention.bytes"].value == "1048576"
    assert seen["max.message.bytes"].value == "2000000"


@pytest.mark.parametrize("kind", ["clients", "users"])
def test_client_quotas_served(cluster: Cluster, kind: str) -> None:
    """Quotas of users and clients (test_client_quotas.py has the rest)."""
    name = f"quota-{kind}"
    add = ["--alter", "--add-config", "consumer_byte_rate=1024"]
    out = cluster.ok(CONFIGS, "--entity-type", kind, "--entity-name", name, *add)
    assert out == f"Completed updating config for {kind[:-1]} {name}.\n"
    out = cluster.ok(CONFIGS, "--entity-type", kind, "--entity-name", name, "--describe")
    printed = "user-principal" if kind == "users" else "client-id"
    assert f"Quota configs for {printed} '{name}' are consumer_byte_rate=1024.0\n" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "exactly one action: --describe, --alter"),
        (("--describe", "--alter", "--topic", "cfg-t"), "exactly one action"),
        (("--alter", "--entity-type", "topics", "--add-config", "a=1"), "An entity name must"),
        (("--alter", "--topic", "cfg-t"), "At least one of --add-config"),
        (("--describe", "--entity-type", "nodes"), "Invalid entity type nodes"),
        (("--describe",), "At least one entity type must be specified"),
        (("--describe", "--broker", "one"), "must be a valid integer broker id"),
        (("--describe", "--topic", "cfg-t", "--add-config", "a=1"), "can't be used with"),
        (("--alter", "--topic", "cfg-t", "--add-config", "retention.ms"), "key=val"),
        (("--alter", "--topic", "cfg-t", "--add-config", "re tention=1"), "Invalid character"),
        (("--alter", "--topic", "cfg-t", "--delete-config", "retention.ms"), "Invalid config(s)"),
        (("--alter", "--topic", "cfg-t", "--add-config", "retention.ms=soon"), "INVALID_CONFIG"),
        (("--alter", "--topic", "nope", "--add-config", "retention.ms=1"), "UNKNOWN_TOPIC"),
        (("--describe", "--topic", "cfg-t", "--entity-name", "cfg-t"), "conjunction"),
        (("--describe", "--topic", "cfg-t", "--entity-type", "topics"), "Duplicate entity type"),
        (("--describe", "--entity-type", "client-metrics", "--entity-name", "g"), "not supported"),
        (("--describe", "--topic", "cfg-t", "--command-config", "/no/such"), "cannot read"),
    ],
)
def test_configs_bad_input(cluster: Cluster, args: tuple[str, ...], message: str) -> None:
    cluster.fails(CONFIGS, *args, message=message)


def test_configs_unreachable_broker() -> None:
    p = subprocess.run(
        [CONFIGS, "--bootstrap-server", "127.0.0.1:1", "--describe", "--topic", "t"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1 and "cannot connect" in p.stderr and "Traceback" not in p.stderr


# -- kafka-acls.sh -------------------------------------------------------------------------


def test_topic_acls_add_list_remove(cluster: Cluster) -> None:
    out = cluster.ok(
        ACLS,
        "--add",
        "--topic",
        "acl-t",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--allow-principal",
        "User:alice",
        "--allow-host",
        "127.0.0.1",
    )
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-t, " in out
    assert "\t(principal=User:alice, host=127.0.0.1, operation=READ, permissionType=ALLOW)" in out
    want = {
        (
            ResourceType.TOPIC,
            "acl-t",
            ResourcePatternType.LITERAL,
            "User:alice",
            "127.0.0.1",
            op,
            AclPermissionType.ALLOW,
        )
        for op in (AclOperation.READ, AclOperation.WRITE)
    }
    assert cluster.acls(ResourceType.TOPIC, "acl-t") == want

    # adding again creates nothing and says so
    out = cluster.ok(
        ACLS,
        "--add",
        "--topic",
        "acl-t",
        "--operation",
        "Read",
        "--allow-principal",
        "User:alice",
        "--allow-host",
        "127.0.0.1",
    )
    assert "already exists." in out and "Adding" not in out

    out = cluster.ok(ACLS, "--list", "--topic", "acl-t")
    assert out.startswith(
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-t, "
        "patternType=LITERAL)`:\n"
    )
    assert out.count("principal=User:alice") == 2

    # --remove prompts: "n" keeps them, end of input keeps them (exit 1), "y" removes
    remove = (
        "--remove",
        "--topic",
        "acl-t",
        "--allow-principal",
        "User:alice",
        "--allow-host",
        "127.0.0.1",
        "--operation",
        "Read",
    )
    assert "Are you sure you want to remove ACLs" in cluster.ok(ACLS, *remove, stdin="n\n")
    assert cluster.acls(ResourceType.TOPIC, "acl-t") == want
    p = cluster.run(ACLS, *remove, stdin="")
    assert p.returncode == 1 and "--force" in p.stderr
    assert cluster.acls(ResourceType.TOPIC, "acl-t") == want
    cluster.ok(ACLS, *remove, stdin="y\n")
    assert {b[5] for b in cluster.acls(ResourceType.TOPIC, "acl-t")} == {AclOperation.WRITE}

    # without principals, --remove --force deletes every ACL of the resource
    cluster.ok(ACLS, "--remove", "--force", "--topic", "acl-t")
    assert cluster.acls(ResourceType.TOPIC, "acl-t") == set()


def test_cluster_mirror_acls_as_in_the_kip(cluster: Cluster) -> None:
    ops = ("Create", "Alter", "Describe", "Delete", "AlterConfigs", "DescribeConfigs")
    out = cluster.ok(
        ACLS,
        "--add",
        "--cluster-mirror",
        "my-mirror",
        *(a for op in ops for a in ("--operation", op)),
        "--allow-principal",
        "User:mirror-admin",
    )
    assert out.splitlines()[0] == (
        "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, "
        "patternType=LITERAL)`: "
    )
    names = ("CREATE", "ALTER", "DESCRIBE", "DELETE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS")
    shown = [ln.strip() for ln in out.splitlines()[1:] if ln.strip()]
    assert shown == [
        f"(principal=User:mirror-admin, host=*, operation={n}, permissionType=ALLOW)" for n in names
    ]
    codes = (CREATE, ALTER, DESCRIBE, DELETE, ALTER_CONFIGS, DESCRIBE_CONFIGS)
    assert cluster.mirror_acls("my-mirror") == {
        ("my-mirror", "User:mirror-admin", "*", op, ALLOW) for op in codes
    }

    out = cluster.ok(
        ACLS,
        "--add",
        "--cluster-mirror",
        "*",
        "--operation",
        "Describe",
        "--operation",
        "DescribeConfigs",
        "--allow-principal",
        "User:monitor",
    )
    assert "ResourcePattern(resourceType=CLUSTER_MIRROR, name=*, patternType=LITERAL)" in out
    assert cluster.mirror_acls("*") == {
        ("*", "User:monitor", "*", op, ALLOW) for op in (DESCRIBE, DESCRIBE_CONFIGS)
    }

    out = cluster.ok(ACLS, "--list", "--cluster-mirror", "my-mirror")
    assert out.splitlines()[0] == (
        "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, "
        "patternType=LITERAL)`:"
    )
    assert sorted(ln.strip() for ln in out.splitlines()[1:] if ln.strip()) == sorted(shown)
    # MATCH lists what applies to my-mirror: its own ACLs and the wildcard's
    out = cluster.ok(
        ACLS, "--list", "--cluster-mirror", "my-mirror", "--resource-pattern-type", "match"
    )
    assert "name=*," in out and "name=my-mirror," in out

    # an operation a mirror does not take is refused before anything is sent
    cluster.fails(
        ACLS,
        "--add",
        "--cluster-mirror",
        "my-mirror",
        "--operation",
        "Read",
        "--allow-principal",
        "User:x",
        message="ResourceType CLUSTER_MIRROR only supports",
    )

    cluster.ok(ACLS, "--remove", "--force", "--cluster-mirror", "my-mirror")
    cluster.ok(ACLS, "--remove", "--force", "--cluster-mirror", "*")
    assert cluster.mirror_acls(None) == set()


def test_producer_and_consumer_conveniences(cluster: Cluster) -> None:
    out = cluster.ok(
        ACLS,
        "--add",
        "--producer",
        "--topic",
        "prod-t",
        "--allow-principal",
        "User:p",
        "--idempotent",
    )
    assert "resourceType=CLUSTER, name=kafka-cluster" in out
    topic = {b[5] for b in cluster.acls(ResourceType.TOPIC, "prod-t") if b[3] == "User:p"}
    assert topic == {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE}
    broker = {b[5] for b in cluster.acls(ResourceType.BROKER) if b[3] == "User:p"}
    assert broker == {AclOperation.IDEMPOTENT_WRITE}

    cluster.ok(
        ACLS,
        "--add",
        "--consumer",
        "--topic",
        "prod-t",
        "--group",
        "grp",
        "--allow-principal",
        "User:c",
    )
    assert {b[5] for b in cluster.acls(ResourceType.TOPIC, "prod-t") if b[3] == "User:c"} == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
    }
    assert {b[5] for b in cluster.acls(ResourceType.GROUP, "grp")} == {AclOperation.READ}

    out = cluster.ok(ACLS, "--list", "--principal", "User:c")
    assert out.startswith("ACLs for principal `User:c`\n") and "User:p" not in out

    cluster.ok(
        ACLS,
        "--remove",
        "--force",
        "--producer",
        "--topic",
        "prod-t",
        "--allow-principal",
        "User:p",
        "--idempotent",
    )
    assert all(b[3] != "User:p" for b in cluster.acls(ResourceType.ANY))
    assert {b[3] for b in cluster.acls(ResourceType.TOPIC, "prod-t")} == {"User:c"}
    cluster.ok(ACLS, "--remove", "--force", "--topic", "prod-t", "--group", "grp")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--list", "--add"), "exactly one action"),
        (("--add", "--topic", "t"), "--allow-principal, --deny-principal"),
        (("--add", "--allow-principal", "User:a"), "at least one resource"),
        (("--add", "--topic", "t", "--allow-principal", "alice"), "principalType:principalName"),
        (("--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"), "Fly"),
        (
            (
                "--add",
                "--topic",
                "t",
                "--allow-principal",
                "User:a",
                "--operation",
                "ClusterAction",
            ),
            "ResourceType TOPIC only supports",
        ),
        (
            (
                "--add",
                "--topic",
                "t",
                "--allow-principal",
                "User:a",
                "--resource-pattern-type",
                "match",
            ),
            "not valid when adding acls",
        ),
        (("--list", "--resource-pattern-type", "fuzzy"), "Unknown resource-pattern-type"),
        (("--list", "--producer", "--topic", "t"), "can't be used with"),
        (("--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"), "--group"),
        (("--add", "--idempotent", "--topic", "t", "--allow-principal", "User:a"), "--producer"),
        (("--add", "--topic", "t", "--principal", "User:a"), "only available if --list"),
    ],
)
def test_acls_bad_input(cluster: Cluster, args: tuple[str, ...], message: str) -> None:
    before = cluster.acls(ResourceType.ANY)
    cluster.fails(ACLS, *args, message=message)
    assert cluster.acls(ResourceType.ANY) == before


def test_the_shipped_broker_dynamic_file_applies(cluster: Cluster) -> None:
    """docs/operations.md's command, with the file the repository ships."""
    shipped = ROOT / "config" / "broker-dynamic.properties"
    cluster.ok(
        CONFIGS, "--entity-type", "brokers", "--entity-name", "1",
        "--alter", "--add-config-file", str(shipped),
    )  # fmt: skip
    shipped_keys = load_properties(shipped)  # every key of the file, not just today's one
    assert shipped_keys
    seen = cluster.configs(ResourceType.BROKER, "1")
    for key, value in shipped_keys.items():
        assert seen[key].value == value, key
        assert seen[key].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, key
    cluster.ok(
        CONFIGS, "--entity-type", "brokers", "--entity-name", "1",
        "--alter", "--delete-config", ",".join(shipped_keys),
    )  # fmt: skip
