"""docker-compose.yml, config/prometheus.yml (and the rules it loads), the Grafana provisioning
files and the Dockerfile agree with each other and with the kmirror configs they name (no Docker
engine needed), and the container entry point formats and starts a node."""

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.config.listeners import Listener
from broker.config.meta_properties import parse_uuid
from broker.config.properties import load_properties
from broker.config.server_config import ServerConfig, load_server_config

from .integration.node import Node

ROOT = Path(__file__).resolve().parents[1]


def compose() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(doc, dict) and isinstance(doc.get("services"), dict)
    return doc


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]  # type: ignore[no-any-return]


def kmirror_services() -> dict[str, dict[str, Any]]:
    """Services built from this repository's Dockerfile."""
    out = {n: s for n, s in services().items() if "build" in s}
    assert out, "no kmirror service (built from the Dockerfile) in docker-compose.yml"
    return out


def service_config(svc: dict[str, Any]) -> tuple[str, ServerConfig]:
    """The server.properties the service runs (its command, else the Dockerfile's CMD)."""
    command = svc.get("command") or dockerfile_instruction("CMD")
    path = command[0] if isinstance(command, list) else shlex.split(command)[0]
    assert (ROOT / path).is_file(), f"{path} does not exist"
    config, warnings = load_server_config(ROOT / path)
    assert warnings == [], warnings
    return path, config


def published(svc: dict[str, Any]) -> dict[int, int]:
    """Host port -> container port of the service's ``ports``."""
    out: dict[int, int] = {}
    for entry in svc.get("ports", []):
        parts = str(entry).split("/")[0].split(":")
        assert len(parts) in (2, 3), f"port mapping {entry!r}: give host and container ports"
        out[int(parts[-2])] = int(parts[-1])
    return out


def mount_targets(svc: dict[str, Any]) -> dict[str, str]:
    """Container path -> source (named volume or host path) of the service's volumes."""
    out: dict[str, str] = {}
    for v in svc.get("volumes", []):
        source, target = str(v).split(":")[:2]
        out[target] = source
    return out


def dockerfile_lines() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def dockerfile_instruction(name: str) -> Any:
    values = [rest for word, rest in dockerfile_lines() if word == name]
    assert values, f"the Dockerfile has no {name}"
    rest = values[-1]
    return yaml.safe_load(rest) if rest.startswith("[") else rest


def check_advertised(name: str, svc: dict[str, Any], advertised: list[tuple[str, int]]) -> None:
    """Every advertised endpoint is reachable where it is meant to be: the service's own name
    inside the compose network, or localhost through a port published 1:1."""
    hostnames = {name, svc.get("hostname", name)}
    ports = published(svc)
    assert any(host in hostnames for host, _ in advertised), (
        f"{name}: no listener advertised under the service name, so other containers "
        f"cannot reach it: {advertised}"
    )
    for host, port in advertised:
        if host in hostnames:
            continue
        assert host == "localhost", f"{name}: advertises {host}:{port}, unknown in compose"
        assert ports.get(port) == port, f"{name}: localhost:{port} is advertised, not published"


# -- kmirror services --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(kmirror_services()))
def test_kmirror_service_matches_its_config(name: str) -> None:
    svc = kmirror_services()[name]
    assert svc["build"] in (".", "./", {"context": "."}), "built from the top-level Dockerfile"
    path, config = service_config(svc)
    assert svc.get("hostname", name) == name
    listeners = {li.name: li for li in config.listeners}
    advertised = [(li.host or "", li.port) for li in config.advertised_listeners]
    for adv in config.advertised_listeners:
        bound: Listener = listeners[adv.name]
        assert bound.host in (None, "0.0.0.0"), f"{path}: {adv.name} binds {bound.host} only"
        assert adv.port in (0, bound.port), f"{path}: {adv.name} advertises another port"
    check_advertised(name, svc, advertised)
    # the inter-broker listener is the one advertised under the service name
    ibl = config.inter_broker_listener_name
    assert any(li.name == ibl and li.host == name for li in config.advertised_listeners)
    assert all(v.host in kmirror_services() for v in config.controller_quorum_voters)
    # Prometheus reaches the metrics port from its own container
    assert config.metrics_port > 0
    assert config.metrics_host in ("0.0.0.0", "", "::")
    # the log dirs live on a volume, and the cluster id the entry point formats with is valid
    mounts = mount_targets(svc)
    for d in config.log_dirs:
        assert any(d == t or d.startswith(t.rstrip("/") + "/") for t in mounts), (
            f"{path}: log dir {d} is not on a volume"
        )
    parse_uuid(svc["environment"]["KMIRROR_CLUSTER_ID"])


def test_kmirror_services_form_one_cluster() -> None:
    """Every node names the same voters, each voter is a kmirror service at its controller
    listener under its own node id, and all share one cluster id."""
    configs = {name: service_config(svc)[1] for name, svc in kmirror_services().items()}
    voter_sets = {
        tuple(sorted((v.node_id, v.host, v.port) for v in c.controller_quorum_voters))
        for c in configs.values()
    }
    assert len(voter_sets) == 1, voter_sets
    ((voters),) = voter_sets
    assert sorted(c.node_id for c in configs.values()) == sorted(
        {c.node_id for c in configs.values()}
    )
    for node_id, host, port in voters:
        c = configs[host]
        assert c.node_id == node_id, f"{host} is node {c.node_id}, voter {node_id}"
        controller = [li for li in c.listeners if li.name in c.controller_listener_names]
        assert [li.port for li in controller] == [port], f"{host}: no controller on {port}"
    ids = {svc["environment"]["KMIRROR_CLUSTER_ID"] for svc in kmirror_services().values()}
    assert len(ids) == 1, ids
    # three nodes: internal topics and new topics get three replicas, two in sync
    if len(configs) >= 3:
        for name, c in configs.items():
            assert c.default_replication_factor == 3 and c.min_insync_replicas == 2, name


def test_prometheus_scrapes_every_kmirror_metrics_port() -> None:
    prom = [s for s in services().values() if str(s.get("image", "")).startswith("prom/prometheus")]
    assert len(prom) == 1
    mounts = mount_targets(prom[0])
    source = mounts.get("/etc/prometheus/prometheus.yml")
    assert source is not None and (ROOT / source).resolve() == ROOT / "config/prometheus.yml"
    doc = yaml.safe_load((ROOT / "config/prometheus.yml").read_text())
    targets = [
        t for job in doc["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]
    ]
    wanted = {
        f"{name}:{service_config(svc)[1].metrics_port}" for name, svc in kmirror_services().items()
    }
    assert targets and set(targets) == wanted, f"targets {targets}, kmirror metrics {wanted}"
    assert len(targets) == len(set(targets))


def _service_by_image(prefix: str) -> tuple[str, dict[str, Any]]:
    found = [(n, s) for n, s in services().items() if str(s.get("image", "")).startswith(prefix)]
    assert len(found) == 1, f"one {prefix} service wanted: {[n for n, _ in found]}"
    return found[0]


def test_prometheus_mounts_the_rules_its_config_loads() -> None:
    """config/prometheus.yml names its rule files relative to itself; in the container they
    resolve to a mount of the same repository directory, and the pattern matches rule files."""
    _name, prom = _service_by_image("prom/prometheus")
    mounts = mount_targets(prom)
    doc = yaml.safe_load((ROOT / "config/prometheus.yml").read_text())
    patterns = doc.get("rule_files")
    assert patterns, "config/prometheus.yml loads no rules"
    for pattern in patterns:
        assert not pattern.startswith("/"), f"{pattern}: relative to the config file, please"
        assert sorted((ROOT / "config").glob(pattern)), f"{pattern} matches no file in config/"
        directory = str(Path(pattern).parent)
        target = f"/etc/prometheus/{directory}"
        assert target in mounts, f"{pattern}: nothing mounted at {target}"
        assert (ROOT / mounts[target]).resolve() == (ROOT / "config" / directory).resolve()


def test_grafana_is_provisioned_with_prometheus_and_the_dashboards() -> None:
    name, grafana = _service_by_image("grafana/grafana")
    image = str(grafana["image"])
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", image), f"{image}: pin a version"
    mounts = mount_targets(grafana)
    provisioning = ROOT / mounts["/etc/grafana/provisioning"]
    assert provisioning.resolve() == (ROOT / "config/grafana/provisioning").resolve()
    # the datasource is the compose network's Prometheus, at its container port
    prom_name, prom = _service_by_image("prom/prometheus")
    assert prom_name in grafana.get("depends_on", [])
    sources = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())
    (ds,) = sources["datasources"]
    assert ds["type"] == "prometheus" and ds["uid"] == "prometheus"
    assert ds["url"] == f"http://{prom_name}:{next(iter(published(prom).values()))}"
    # the dashboard provider reads a directory mounted from config/grafana/dashboards
    providers = yaml.safe_load((provisioning / "dashboards/kmirror.yml").read_text())["providers"]
    paths = [p["options"]["path"] for p in providers]
    assert paths and all(p in mounts for p in paths), f"{name}: {paths} not mounted"
    for p in paths:
        source = (ROOT / mounts[p]).resolve()
        assert source == (ROOT / "config/grafana/dashboards").resolve()
        assert sorted(source.glob("*.json")), f"{source}: no dashboard"
    assert 3000 in published(grafana).values()


def test_kafka_source_is_reachable_from_the_mirror() -> None:
    src = {
        n: s for n, s in services().items() if str(s.get("image", "")).startswith("apache/kafka")
    }
    assert len(src) == 1
    ((name, svc),) = src.items()
    env = {k: str(v) for k, v in svc["environment"].items()}
    assert "broker" in env["KAFKA_PROCESS_ROLES"] and "controller" in env["KAFKA_PROCESS_ROLES"]
    listeners = dict(
        re.fullmatch(r"(\w+)://[^:]*:(\d+)", x).groups()  # type: ignore[union-attr]
        for x in env["KAFKA_LISTENERS"].split(",")
    )
    advertised = []
    for x in env["KAFKA_ADVERTISED_LISTENERS"].split(","):
        lname, host, port = re.fullmatch(r"(\w+)://([^:]+):(\d+)", x).groups()  # type: ignore[union-attr]
        assert listeners.get(lname) == port, f"{lname} advertises a port it does not bind"
        advertised.append((host, int(port)))
    check_advertised(name, svc, advertised)
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].endswith(f"@{name}:{listeners['CONTROLLER']}")
    # the mirror config the docs use points at the source's in-network listener
    props = load_properties(ROOT / "config/docker/mirror-source.properties")
    assert props.get("bootstrap.servers") in {f"{h}:{p}" for h, p in advertised if h == name}


# -- Dockerfile -------------------------------------------------------------------------------


def test_dockerfile_paths_exist() -> None:
    lines = dockerfile_lines()
    assert lines[0] == ("FROM", "python:3.11-slim")
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    copied = []
    for word, rest in lines:
        if word in ("COPY", "ADD"):
            *sources, _dest = rest.split()
            copied += sources
    assert {"pyproject.toml", "broker", "protocol", "bin", "config"} <= set(copied)
    for s in copied:
        assert (ROOT / s).exists(), f"the Dockerfile copies {s}, which does not exist"
        assert s not in ignored, f".dockerignore leaves {s} out of the build context"
    entry = dockerfile_instruction("ENTRYPOINT")
    assert os.access(ROOT / entry[0], os.X_OK), f"{entry[0]} is not executable"
    cmd = dockerfile_instruction("CMD")
    assert (ROOT / cmd[0]).is_file()
    load_server_config(ROOT / cmd[0])
    # the bin/ scripts run .venv/bin/python: the image must install into that venv
    assert any(w == "RUN" and "python -m venv .venv" in r for w, r in lines)


# -- the entry point, for real (without a container) ------------------------------------------


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited with {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"not listening on {port} within {timeout}s")


def test_entrypoint_formats_once_then_starts(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.write_config()
    script = str(ROOT / "bin/docker-entrypoint.sh")
    env = {**os.environ, "KMIRROR_CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qk"}
    for _run in range(2):  # the second start finds the log dir formatted already
        with (tmp_path / "out").open("ab") as out:
            proc = subprocess.Popen(
                [script, str(node.config_path)], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        try:
            _wait_listening(node.port, proc)
            proc.send_signal(signal.SIGTERM)  # reaches the node: the script exec's it
            assert proc.wait(20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert (node.log_dir / "meta.properties").is_file()
    out_text = (tmp_path / "out").read_text()
    assert out_text.count("Formatting") == 1 and "already formatted" in out_text


def test_entrypoint_requires_a_cluster_id(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.write_config()
    env = {k: v for k, v in os.environ.items() if k != "KMIRROR_CLUSTER_ID"}
    p = subprocess.run(
        [str(ROOT / "bin/docker-entrypoint.sh"), str(node.config_path)],
        capture_output=True,
        env=env,
        timeout=30,
    )
    assert p.returncode != 0 and b"KMIRROR_CLUSTER_ID" in p.stderr
    assert not (node.log_dir / "meta.properties").exists()
