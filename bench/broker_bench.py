"""Broker throughput against baselines, each side measured in its own processes on loopback.

Run with ``python -m bench.broker_bench`` (or ``bench/run.sh``). Three cases, one run, < 90 s:

1. produce 100-byte records (confluent-kafka, acks=1, linger.ms=5, no compression) into a kmirror
   node vs into `bench.null_broker` (answers Produce and discards): records/s, goal >= 0.8.
2. produce 10 KiB records in 1 MiB batches into kmirror vs a raw socket-to-file copy of the same
   bytes (`bench_clients file-sink`): MB/s, goal >= 0.5. The same producer into the null broker
   is printed too (no goal): it is the client's own ceiling on this machine.
3. consume what case 2 wrote (confluent-kafka consumer from offset 0) vs a raw file-to-socket copy
   of the same bytes to a receiver that drops them: MB/s, goal >= 0.5.

Client and server are always separate processes; on a small machine they share the cores, as in
any loopback benchmark. Each side runs ``--rounds`` times, alternating, and the best run of each
counts (the machine is shared, so the best run is the least disturbed one). ``node cpu`` is the
node's CPU time (user + system) over the client's wall time in that best run: well under 100%
means the broker was not what limited the rate. ``--profile DIR`` records a py-spy profile of the
node for each kmirror run (needs ``py-spy`` in the venv).
"""

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.node import Node

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
SMALL_TOPIC = "bench-small"
BIG_TOPIC = "bench-big"
BIG_RECORD = 10 * 1024
BIG_BATCH = MiB
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    case: str
    unit: str
    ours: float
    baseline: float
    goal: float | None
    node_cpu: float  # node CPU seconds / wall seconds in our best run

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else 0.0


@dataclass
class Run:
    rate: float
    node_cpu: float = 0.0


def best(runs: list[Run]) -> Run:
    return max(runs, key=lambda r: r.rate)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        # Fields after the parenthesised command name; utime and stime are the 12th and 13th.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Bench:
    def __init__(self, workdir: Path, rounds: int, profile: Path | None, fmt: str) -> None:
        self.workdir = workdir
        self.rounds = rounds
        self.profile = profile
        self.profile_format = fmt
        self.procs: list[subprocess.Popen[str]] = []
        self.stderr = (workdir / "clients.err").open("w")

    # -- processes

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self.stderr,  # librdkafka logs; kept for a post-mortem (--keep)
            text=True,
        )
        self.procs.append(proc)
        return proc

    def client(self, role: str, *args: str) -> subprocess.Popen[str]:
        return self.spawn("-m", "bench.bench_clients", role, *args)

    @staticmethod
    def port_of(proc: subprocess.Popen[str], timeout: float = 20.0) -> int:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("listening "):
            raise RuntimeError(f"server did not report its port: {line!r}")
        return int(line.split()[1])

    @staticmethod
    def result(proc: subprocess.Popen[str], timeout: float = 120.0) -> dict[str, Any]:
        out, _ = proc.communicate(timeout=timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"client failed ({proc.returncode}): {out[-500:]!r}")
        data: dict[str, Any] = json.loads(lines[-1])
        if data.get("error") or data.get("errors"):
            raise RuntimeError(f"client reported errors: {data}")
        return data

    def on_node(
        self, node: Node, name: str, fn: Callable[[], dict[str, Any]], rate: Callable[..., float]
    ) -> Run:
        """One client run against the node, with its CPU share (and a profile if asked)."""
        assert node.proc is not None
        spy = self._start_profile(node.proc.pid, name)
        before = cpu_seconds(node.proc.pid)
        data = fn()
        used = cpu_seconds(node.proc.pid) - before
        self._stop_profile(spy)
        return Run(rate(data), used / data["seconds"])

    def _start_profile(self, pid: int, name: str) -> subprocess.Popen[bytes] | None:
        if self.profile is None:
            return None
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.profile.mkdir(parents=True, exist_ok=True)
        fmt = self.profile_format
        out = self.profile / f"{name}.{'svg' if fmt == 'flamegraph' else 'txt'}"
        # --nonblocking: don't stop the node for each sample, so the numbers stay meaningful.
        cmd = [py_spy, "record", "--nonblocking", "-o", str(out), "-f", fmt, "--pid", str(pid)]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def _stop_profile(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is not None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()

    def null_broker(self, topic: str, partitions: int) -> tuple[subprocess.Popen[str], str]:
        null = self.spawn(
            "-m", "bench.null_broker", "--topic", topic, "--partitions", str(partitions)
        )
        return null, f"127.0.0.1:{self.port_of(null)}"

    @staticmethod
    def stop(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.stderr.close()

    # -- cases

    def produce(self, bootstrap: str, topic: str, *extra: str) -> dict[str, Any]:
        return self.result(
            self.client("produce", "--bootstrap", bootstrap, "--topic", topic, *extra)
        )

    def small_records(self, node: Node, partitions: int, seconds: float) -> Row:
        null, null_bootstrap = self.null_broker(SMALL_TOPIC, partitions)
        args = ("--record-size", "100", "--linger-ms", "5", "--seconds", str(seconds))

        def rate(d: dict[str, Any]) -> float:
            return float(d["records"] / d["seconds"])

        ours: list[Run] = []
        base: list[Run] = []
        for i in range(self.rounds):
            base.append(Run(rate(self.produce(null_bootstrap, SMALL_TOPIC, *args))))
            run = self.on_node(
                node,
                f"produce-small-{i}",
                lambda: self.produce(node.bootstrap, SMALL_TOPIC, *args),
                rate,
            )
            ours.append(run)
        self.stop(null)
        b, o = best(base), best(ours)
        return Row(
            f"produce 100 B x {partitions}p acks=1 (vs null broker)",
            "rec/s",
            o.rate,
            b.rate,
            0.8,
            o.node_cpu,
        )

    def big_batches(self, node: Node, volume: int) -> tuple[list[Row], int]:
        """Returns the rows and how many records the node got in its first round."""
        records = volume // BIG_RECORD
        nbytes = records * BIG_RECORD
        args = (
            "--record-size",
            str(BIG_RECORD),
            "--bytes",
            str(nbytes),
            "--linger-ms",
            "50",
            "--batch-size",
            str(BIG_BATCH),
            "--max-request",
            str(4 * BIG_BATCH),
        )

        def rate(d: dict[str, Any]) -> float:
            if d["records"] != records:
                raise RuntimeError(f"produced {d['records']} of {records} records")
            return float(d["bytes"] / MiB / d["seconds"])

        null, null_bootstrap = self.null_broker(BIG_TOPIC, 1)
        ours: list[Run] = []
        base: list[Run] = []
        ceiling: list[Run] = []
        for i in range(self.rounds):
            base.append(Run(self._socket_to_file(nbytes, i)))
            ours.append(
                self.on_node(
                    node,
                    f"produce-big-{i}",
                    lambda: self.produce(node.bootstrap, BIG_TOPIC, *args),
                    rate,
                )
            )
            ceiling.append(Run(rate(self.produce(null_bootstrap, BIG_TOPIC, *args))))
        self.stop(null)
        o = best(ours)
        rows = [
            Row(
                "produce 1 MiB batches of 10 KiB (vs socket->file)",
                "MB/s",
                o.rate,
                best(base).rate,
                0.5,
                o.node_cpu,
            ),
            Row(
                "  same producer (vs null broker: client ceiling)",
                "MB/s",
                o.rate,
                best(ceiling).rate,
                None,
                o.node_cpu,
            ),
        ]
        return rows, records

    def _socket_to_file(self, nbytes: int, round_: int) -> float:
        # A new file per round, the earlier ones kept, as the node's log keeps its segments:
        # both sides then need fresh page-cache pages, which on a VM can cost more than reuse.
        sink = self.client("file-sink", "--path", str(self.workdir / f"copy-{round_}.bin"))
        port = self.port_of(sink)
        sent = self.result(self.client("raw-send", "--port", str(port), "--bytes", str(nbytes)))
        got = self.result(sink)
        if got["bytes"] != nbytes or not sent["acked"]:
            raise RuntimeError(f"raw copy incomplete: {got} {sent}")
        return float(nbytes / MiB / sent["seconds"])

    def consume(self, node: Node, records: int) -> Row:
        file_bytes = records * BIG_RECORD
        records += 1  # the producer's warm-up record is in the topic too
        nbytes = records * BIG_RECORD

        def consume_once() -> dict[str, Any]:
            return self.result(
                self.client(
                    "consume",
                    "--bootstrap",
                    node.bootstrap,
                    "--topic",
                    BIG_TOPIC,
                    "--records",
                    str(records),
                )
            )

        def rate(d: dict[str, Any]) -> float:
            if d["records"] != records or d["bytes"] != nbytes:
                raise RuntimeError(f"consumed {d} of {records} records")
            return float(nbytes / MiB / d["seconds"])

        ours: list[Run] = []
        base: list[Run] = []
        for i in range(self.rounds):
            base.append(Run(self._file_to_socket(file_bytes)))
            ours.append(self.on_node(node, f"consume-{i}", consume_once, rate))
        o = best(ours)
        return Row(
            "consume 10 KiB records from offset 0 (vs file->socket)",
            "MB/s",
            o.rate,
            best(base).rate,
            0.5,
            o.node_cpu,
        )

    def _file_to_socket(self, nbytes: int) -> float:
        sink = self.client("discard-sink")
        port = self.port_of(sink)
        sender = self.client(
            "file-send", "--port", str(port), "--path", str(self.workdir / "copy-0.bin")
        )
        got = self.result(sink)
        self.result(sender)
        if got["bytes"] != nbytes:
            raise RuntimeError(f"raw copy moved {got['bytes']} of {nbytes} bytes")
        return float(nbytes / MiB / got["seconds"])


def create_topics(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(SMALL_TOPIC, partitions, 1), NewTopic(BIG_TOPIC, 1, 1)], operation_timeout=20
    )
    for f in futures.values():
        f.result(30)


def stop_node(node: Node, workdir: Path, *, keep: bool) -> None:
    """Stop the bench's node (its log tail if it did not exit cleanly); remove or keep its dir."""
    code = node.stop()
    if code != 0:
        print(f"node exited with {code}:\n{node.log_tail()}", file=sys.stderr)
    if keep:
        print(f"work directory kept: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'case':<55} {'ours':>10} {'baseline':>10} {'unit':>6} {'ratio':>6} {'goal':>5}"
        f" {'node cpu':>9}"
    )
    print(head)
    print("-" * (len(head) + 5))
    for r in rows:
        goal = "-" if r.goal is None else f"{r.goal:.2f}"
        mark = "" if r.goal is None else ("ok" if r.ratio >= r.goal else "MISS")
        print(
            f"{r.case:<55} {r.ours:>10,.0f} {r.baseline:>10,.0f} {r.unit:>6} {r.ratio:>6.2f}"
            f" {goal:>5} {r.node_cpu:>8.0%} {mark}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="case 1 budget per run")
    parser.add_argument("--partitions", type=int, default=4, help="partitions in case 1")
    parser.add_argument("--mib", type=int, default=150, help="volume of cases 2 and 3, MiB")
    parser.add_argument("--rounds", type=int, default=2, help="runs per side; the best counts")
    parser.add_argument("--profile", type=Path, help="write py-spy profiles of the node here")
    parser.add_argument(
        "--profile-format", default="flamegraph", choices=("flamegraph", "raw", "speedscope")
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-bench-"))
    bench = Bench(workdir, args.rounds, args.profile, args.profile_format)
    node = Node(
        workdir / "node",
        message__max__bytes=str(2 * BIG_BATCH),
        auto__create__topics__enable="false",
    )
    started = time.perf_counter()
    rows: list[Row] = []
    try:
        node.start()
        create_topics(node.bootstrap, args.partitions)
        rows.append(bench.small_records(node, args.partitions, args.seconds))
        big_rows, records = bench.big_batches(node, args.mib * MiB)
        rows.extend(big_rows)
        rows.append(bench.consume(node, records))
    finally:
        bench.close()
        stop_node(node, workdir, keep=args.keep)
    print_table(rows)
    print(f"({time.perf_counter() - started:.0f} s, {os.cpu_count()} cores, best of {args.rounds})")


if __name__ == "__main__":
    main()
