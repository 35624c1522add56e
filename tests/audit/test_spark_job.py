"""The audit on Spark (local[2]): one session shared by the module."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from audit.cli import main  # noqa: E402
from audit.job import AuditConfig, plan, run_audit  # noqa: E402
from audit.output import report_document, write_json, write_parquet  # noqa: E402
from audit.report import console_summary, write_html  # noqa: E402
from audit.session import java_major_version, start_session  # noqa: E402

from .layout import EXPECTED, build_scenario, dump_tree  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    if java_major_version() < 17:
        pytest.skip("Java 17 is not installed")
    session = start_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit")
    build_scenario(root)
    dump_tree(root / "src", root / "text-src" / "src.txt")
    dump_tree(root / "dst", root / "text-dst" / "dst.txt")
    return root


def test_segments_on_spark_with_outputs(spark, scenario: Path, tmp_path: Path) -> None:
    cfg = AuditConfig(
        str(scenario / "src"), str(scenario / "dst"), str(tmp_path), topics=".*", split_bytes=500
    )
    result = run_audit(spark, cfg)
    assert {(r.topic, r.partition): r.verdict for r in result.reports} == EXPECTED
    assert result.exit_code == 2
    doc = report_document(cfg, result)
    write_parquet(spark, result, str(tmp_path))
    write_json(doc, str(tmp_path))
    write_html(doc, result.reports, str(tmp_path))
    table = spark.read.parquet(str(tmp_path / "partitions.parquet"))
    rows = {(r.topic, r.partition): r for r in table.collect()}
    assert rows[("orders", 2)].first_divergent_offset == 12
    assert rows[("orders", 1)].lag_records == 11
    assert spark.read.parquet(str(tmp_path / "differences.parquet")).count() >= 2
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["verdicts"]["DIVERGED"] == 2 and saved["exit_code"] == 2
    assert (tmp_path / "charts" / "orders.png").read_bytes()[:4] == b"\x89PNG"
    assert "orders" in (tmp_path / "report.html").read_text()


def test_dump_text_on_spark(spark, scenario: Path, tmp_path: Path) -> None:
    cfg = AuditConfig(str(scenario / "text-src"), str(scenario / "dst"), str(tmp_path), topics=".*")
    result = run_audit(spark, cfg)
    assert {(r.topic, r.partition): r.verdict for r in result.reports} == EXPECTED
    by_key = {(r.topic, r.partition): r for r in result.reports}
    assert by_key[("orders", 3)].first_divergent_offset == 15


def test_identical_and_lagging_exit_zero(spark, scenario: Path, tmp_path: Path) -> None:
    cfg = AuditConfig(str(scenario / "src"), str(scenario / "dst"), str(tmp_path), topics="orders")
    tasks = [t for t in plan(cfg) if t.partition in (0, 1)]
    good = run_audit(spark, cfg, tasks)
    assert [r.verdict for r in good.reports] == ["IDENTICAL", "LAGGING"]
    assert good.exit_code == 0
    out = io.StringIO()
    console_summary(good.reports, good.counts(), out)
    assert re.search(r"orders-1\s+LAGGING", out.getvalue())


def test_cli_end_to_end_through_the_shell_script(scenario: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            str(ROOT / "bin" / "kafka-mirror-audit.sh"),
            "--source",
            str(scenario / "src"),
            "--destination",
            str(scenario / "dst"),
            "--output",
            str(tmp_path / "out"),
            "--master",
            "local[2]",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert "DIVERGED" in run.stdout and "orders-2" in run.stdout
    assert (tmp_path / "out" / "report.html").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--source", "/nonexistent/src", "--destination", "{dst}", "--output", "{out}"],
            "--source /nonexistent/src",
        ),
        (
            ["--source", "{src}", "--destination", "{src}/orders-0-missing", "--output", "{out}"],
            "--destination",
        ),
        (["--source", "{src}", "--destination", "{dst}", "--output", "{file}"], "--output"),
        (
            ["--source", "{src}", "--destination", "{dst}", "--output", "{out}", "--topics", "("],
            "--topics",
        ),
        (
            [
                "--source",
                "{src}",
                "--destination",
                "{dst}",
                "--output",
                "{out}",
                "--topics",
                "nope",
            ],
            "--topics",
        ),
        (
            ["--source", "{src}", "--destination", "{dst}", "--output", "{out}", "--split-mb", "0"],
            "--split-mb",
        ),
        (["--destination", "{dst}", "--output", "{out}"], "--source"),
        (
            ["--source", "{src}", "--destination", "{dst}", "--output", "{out}", "--bogus"],
            "--bogus",
        ),
    ],
)
def test_usage_and_input_errors_exit_1(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    (tmp_path / "afile").write_text("x")
    values = {
        "src": str(scenario / "src"),
        "dst": str(scenario / "dst"),
        "out": str(tmp_path / "out"),
        "file": str(tmp_path / "afile"),
    }
    argv = [a.format(**values) for a in args]
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 1
    assert needle in capsys.readouterr().err


def test_missing_java_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from audit.session import EnvironmentProblem, check_java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(EnvironmentProblem, match="Java 17"):
        check_java()
    assert sys.executable
