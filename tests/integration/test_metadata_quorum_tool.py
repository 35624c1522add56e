"""bin/kafka-metadata-quorum.sh as a process against a real node: describe --status and
--replication (plain and --human-readable) in Kafka's format, through the controller listener
(the quorum answers) and through the broker listener."""

import re
import subprocess
import time
from pathlib import Path

from .node import ROOT, Node

TOOL = str(ROOT / "bin" / "kafka-metadata-quorum.sh")


def quorum_tool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def status(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        assert sep and re.fullmatch(r"[A-Za-z]+", key), line
        assert line[len(key) + 1 : 24].strip() == "" and line[24] != " ", line  # column 25
        out[key] = value.strip()
    return out


def test_status_and_replication_of_a_single_node(node: Node, tmp_path: Path) -> None:
    controller = f"127.0.0.1:{node.controller_port}"
    res = quorum_tool("--bootstrap-controller", controller, "describe", "--status", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res
    s = status(res.stdout)
    assert list(s) == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert s["ClusterId"] == node.cluster_id and s["LeaderId"] == "1"
    assert int(s["LeaderEpoch"]) >= 1 and int(s["HighWatermark"]) >= 1
    assert s["MaxFollowerLag"] == "0" and s["MaxFollowerLagTimeMs"] == "0"
    assert s["CurrentVoters"] == f'[{{"id": 1, "endpoints": ["CONTROLLER://{controller}"]}}]'
    assert s["CurrentObservers"] == "[]"

    before = int(time.time() * 1000)
    res = quorum_tool(
        "--bootstrap-controller", controller, "describe", "--replication", cwd=tmp_path
    )
    after = int(time.time() * 1000)
    assert res.returncode == 0 and res.stderr == "", res
    header, row, *rest = res.stdout.split("\n")
    assert rest == [""]
    assert header == (
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp"
        "\tLastCaughtUpTimestamp\tStatus\t"
    )
    cells = row.split("\t")
    assert cells[0].strip() == "1" and cells[1] == "AAAAAAAAAAAAAAAAAAAAAA"
    assert int(cells[2]) >= int(s["HighWatermark"]) and cells[3].strip() == "0"
    assert before <= int(cells[4]) <= after and cells[4].strip() == cells[5].strip()
    assert cells[6:] == ["Leader", ""]

    res = quorum_tool(
        "--bootstrap-controller", controller, "describe", "--replication", "--human-readable",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0 and res.stderr == "", res
    assert re.search(r"\t\d+ ms ago\s*\t\d+ ms ago\s*\tLeader\t\n$", res.stdout), res.stdout

    # through the broker listener: the node is the active controller and answers itself
    res = quorum_tool("--bootstrap-server", node.bootstrap, "describe", "--status", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res
    assert status(res.stdout)["LeaderId"] == "1"


def test_bad_flags_exit_1_with_one_line(tmp_path: Path) -> None:
    res = quorum_tool("--bootstrap-controller", "127.0.0.1:1", "describe", cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines()[0] == (
        "Error: One of --status or --replication must be specified with describe sub-command"
    )
    res = quorum_tool("--help", cwd=tmp_path)
    assert res.returncode == 0 and "--bootstrap-controller" in res.stdout
