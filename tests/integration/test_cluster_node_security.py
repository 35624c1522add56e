"""A node whose peers refuse its node-to-node credentials says so (issue 26, node-to-node links).

Three nodes locked down as `secure_cluster` builds them (SASL_SSL/SCRAM-SHA-512 between nodes,
the nodes' credentials from ``kafka-storage.sh format --add-scram``), one of them configured
with a wrong password: it logs one line per peer that refuses it (listener, principal, reason)
and keeps retrying. The working cluster (both SCRAM and mutual TLS between nodes, stock clients,
kill -9 and restart) is test_secure_cluster_acceptance.py's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certs import Pki, make_pki
from tests.waits import wait_for

from .cluster import Cluster
from .secure_cluster import NODE_USER, jaas, secure_cluster


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def stop_after() -> Iterator[list[Cluster]]:
    started: list[Cluster] = []
    yield started
    for c in started:
        c.stop()


def test_a_node_its_peers_refuse_says_so_once_per_peer(
    tmp_path: Path, pki: Pki, stop_after: list[Cluster]
) -> None:
    c = secure_cluster(tmp_path, pki, "scram")
    stop_after.append(c)
    bad = c.node(3)
    for li in ("internal", "controller"):
        bad.settings[f"listener.name.{li}.scram-sha-512.sasl.jaas.config"] = jaas(
            NODE_USER, "wrong"
        )
    bad.write_config()
    for n in c.nodes:
        n.launch()
    c.node(1).wait_started(60)
    c.node(2).wait_started(60)
    lines: list[str] = []

    def refusals() -> list[str]:
        text = bad.output.read_text(errors="replace")
        return [line for line in text.splitlines() if "node link to node" in line]

    wait_for(lambda: len(refusals()) == 2, 30, "node 3 to log its refusals", detail=bad.log_tail)
    time.sleep(3)  # it keeps retrying (with backoff), and says nothing more
    lines = refusals()
    assert len(lines) == 2, lines
    for line in lines:
        assert "WARNING" in line and "on listener CONTROLLER (SASL_SSL, SCRAM-SHA-512)" in line
        assert "as User:kafka, fails:" in line and "retrying with backoff" in line
        assert "invalid credentials" in line or "authentication" in line
    assert bad.proc is not None and bad.proc.poll() is None  # still trying, not exited
