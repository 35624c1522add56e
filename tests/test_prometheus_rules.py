"""The shipped Prometheus rules (config/prometheus/*.rules.yml): promtool accepts them and the
shipped config, their unit tests (config/prometheus/tests/) pass, and every alert carries what an
operator needs (severity, summary, description, a docs section that exists).

Which metric names the rules and the dashboard may use is checked against a running node in
tests/integration/test_monitoring.py."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from .prometheus_files import (
    ROOT,
    RULES_DIR,
    alerts,
    dashboard_queries,
    dashboards,
    metric_names,
    recorded_names,
    require_prometheus,
    rule_files,
    rules,
)

SEVERITIES = {"critical", "warning", "info"}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool, _ = require_prometheus()
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_promtool_check_rules() -> None:
    done = promtool("check", "rules", *map(str, rule_files()))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_unit_tests_of_the_rules() -> None:
    tests = sorted((RULES_DIR / "tests").glob("*.yml"))
    assert tests, "no promtool rule tests"
    done = promtool("test", "rules", *map(str, tests))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_check_config_loads_the_rules() -> None:
    """config/prometheus.yml's rule_files find the shipped rules (relative to the config file,
    as in docker-compose, which mounts config/prometheus/ beside it)."""
    done = promtool("check", "config", "config/prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    for path in rule_files():
        assert str(path.relative_to(ROOT)) in done.stdout, done.stdout


def test_a_broken_rule_fails_promtool(tmp_path: Path) -> None:
    """The check can fail: a rule naming an unknown function is refused."""
    bad = tmp_path / "bad.rules.yml"
    bad.write_text(
        "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: no_such_function(up) > 0\n"
    )
    done = promtool("check", "rules", str(bad))
    assert done.returncode != 0 and "no_such_function" in done.stdout + done.stderr


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_every_alert_tells_the_operator_what_to_do() -> None:
    anchors = _anchors((ROOT / "docs/operations.md").read_text())
    names = [a["alert"] for a in alerts()]
    assert len(names) == len(set(names)), "alert names repeat"
    for a in alerts():
        name = a["alert"]
        assert a.get("labels", {}).get("severity") in SEVERITIES, name
        notes = a.get("annotations", {})
        assert notes.get("summary") and notes.get("description"), name
        link = f"docs/operations.md#{name.lower()}"
        assert link in notes["description"], f"{name}: description does not link {link}"
        assert name.lower() in anchors, f"docs/operations.md has no section {name}"


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for path in sorted((RULES_DIR / "tests").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {a["alert"] for a in alerts()}
    assert names - fired == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested quiet"


def test_recording_rule_names_follow_the_convention() -> None:
    for r in rules():
        if "record" in r:
            assert re.fullmatch(r"kmirror:[a-z0-9_]+:[a-z0-9_]+", r["record"]), r["record"]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up == 0", {"up"}),
        (
            'sum by (job, mirror) (kafka_server_mirror_partitions{state=~"PAUSED|X"}) > 0',
            {"kafka_server_mirror_partitions"},
        ),
        (
            'histogram_quantile(0.99, sum by (request, le) (rate(a_bucket{i=~"$instance"}'
            "[$__rate_interval])))",
            {"a_bucket"},
        ),
        ("time() - max by (m) (x_seconds) > 300", {"x_seconds"}),
        ('a - on (instance) b{c="d"} or absent(e) and 1e3 < f offset 5m', {"a", "b", "e", "f"}),
        ('label_values(up{job="kmirror"}, instance)', {"up"}),
        ("count(count by (digest) (kmirror:x:y))", {"kmirror:x:y"}),
    ],
)
def test_metric_names_of_an_expression(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_dashboard_uses_the_provisioned_datasource_and_known_recordings() -> None:
    """Every panel queries the datasource config/grafana/provisioning provides; a name that
    looks like a recording rule (level:metric:operation) is one the rules define."""
    provisioned = yaml.safe_load(
        (ROOT / "config/grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"]
    uids = {d["uid"] for d in provisioned}
    recorded = recorded_names()
    for name, dash in dashboards().items():
        assert dash.get("uid") and dash.get("title"), name
        for p in dash["panels"]:
            for t in p.get("targets", []):
                assert t["datasource"]["uid"] in uids, (name, p["title"])
            if p["type"] != "row":
                assert p["datasource"]["uid"] in uids, (name, p["title"])
        queries = dashboard_queries(dash)
        assert len(queries) > 20, f"{name}: {len(queries)} queries"
        for q in queries:
            for n in metric_names(q):
                assert ":" not in n or n in recorded, f"{name}: {n} is no recording rule"
