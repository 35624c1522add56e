"""The fault harness itself: SIGSTOP/SIGCONT, kill -9 and restart act on the one node they
name, and a link cut separates exactly two nodes while every other link (and the clients)
keep going. These hold on today's cluster, replicated partitions or not."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.waits import wait_for, wait_value

from .harness import FaultCluster, fault_seed

SEED = fault_seed()
FAST_FENCING = {"broker__session__timeout__ms": "3000", "broker__heartbeat__interval__ms": "500"}


def registered_brokers(fc: FaultCluster) -> set[int]:
    """Unfenced brokers as a live node's metadata lists them (empty when none answers)."""
    for n in fc.alive_nodes():
        try:
            md = AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=3)
        except Exception:
            continue
        return set(md.brokers)
    return set()


def test_pause_resume_kill_restart(tmp_path: Path) -> None:
    with FaultCluster(tmp_path, SEED, **FAST_FENCING) as fc:
        wait_for(lambda: registered_brokers(fc) == {1, 2, 3}, 30, "three registered brokers")
        frozen = fc.rng.choice(fc.nodes)
        fc.pause(frozen)
        others = {1, 2, 3} - {frozen.node_id}
        wait_for(
            lambda: registered_brokers(fc) == others,
            45,
            f"paused node {frozen.node_id} to be fenced (seed {fc.seed})",
            step=0.5,
        )
        fc.resume(frozen)
        wait_for(lambda: registered_brokers(fc) == {1, 2, 3}, 45, "the resumed node back", step=0.5)

        victim = fc.rng.choice(fc.nodes)
        pid = victim.proc.pid if victim.proc else None
        fc.kill(victim)
        assert victim.proc is not None and victim.proc.returncode == -9
        assert all(n.proc and n.proc.poll() is None for n in fc.nodes if n is not victim)
        fc.restart(victim)
        assert victim.proc.pid != pid
        wait_for(
            lambda: registered_brokers(fc) == {1, 2, 3}, 45, "the restarted node back", step=0.5
        )


def test_link_cut_separates_exactly_two_nodes(tmp_path: Path) -> None:
    with FaultCluster(tmp_path, SEED, links=True) as fc:
        proxy = fc.proxy
        assert proxy is not None
        wait_for(lambda: registered_brokers(fc) == {1, 2, 3}, 30, "three registered brokers")
        links = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3) if a != b]

        def flowing(window: float = 2.0) -> set[tuple[int, int]]:
            before = {k: proxy.forwarded(*k) for k in links}
            time.sleep(window)
            return {k for k in links if proxy.forwarded(*k) > before[k]}

        # node-to-node connections are told apart: some link between two nodes carries traffic
        busy = wait_value(flowing, 20, "traffic between nodes through the proxy")
        a, b = fc.rng.choice(sorted(busy))
        fc.cut(a, b)
        time.sleep(0.5)  # bytes read before the cut may still be written once
        now = flowing(3.0)
        assert (a, b) not in now and (b, a) not in now, f"seed {fc.seed}: cut {a}<->{b}: {now}"
        assert now, f"seed {fc.seed}: the cut {a}<->{b} stopped every link"
        # clients are no node: the cut does not touch them
        assert registered_brokers(fc), "a client lost the cluster to a cut between two nodes"
        fc.heal(a, b)
        wait_for(
            lambda: bool({(a, b), (b, a)} & flowing(1.0)),
            30,
            f"traffic on the healed link {a}<->{b} (seed {fc.seed})",
        )
