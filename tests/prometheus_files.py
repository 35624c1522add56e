"""The shipped monitoring files (config/prometheus/, config/grafana/) read for tests: the rules'
and the dashboard's PromQL expressions, the metric names those expressions name, and the
promtool/prometheus binaries (installed through bin/install-promtool.sh where possible)."""

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "config/prometheus"
DASHBOARDS_DIR = ROOT / "config/grafana/dashboards"


def rule_files() -> list[Path]:
    files = sorted(RULES_DIR.glob("*.rules.yml"))
    assert files, f"no *.rules.yml in {RULES_DIR}"
    return files


def rules() -> list[dict[str, Any]]:
    """Every rule (recording and alerting) of the shipped rule files."""
    out: list[dict[str, Any]] = []
    for path in rule_files():
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += group["rules"]
    return out


def alerts() -> list[dict[str, Any]]:
    return [r for r in rules() if "alert" in r]


def dashboards() -> dict[str, dict[str, Any]]:
    files = sorted(DASHBOARDS_DIR.glob("*.json"))
    assert files, f"no dashboard in {DASHBOARDS_DIR}"
    return {p.name: json.loads(p.read_text()) for p in files}


def dashboard_panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    out: list[dict[str, Any]] = []
    for p in dash.get("panels", []):
        out.append(p)
        out += p.get("panels", [])
    return out


def dashboard_queries(dash: dict[str, Any]) -> list[str]:
    """The PromQL of every panel target and of the query variables."""
    out = [t["expr"] for p in dashboard_panels(dash) for t in p.get("targets", []) if "expr" in t]
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]
            out.append(q["query"] if isinstance(q, dict) else q)
    return out


# -- metric names in PromQL ----------------------------------------------------------------------

_KEYWORDS = frozenset(
    [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "inf",
        "nan",
        "atan2",
    ]
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"label_values\(\s*([^,()]*?)\s*,\s*\w+\s*\)")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana variable query such as
    ``label_values(metric{...}, label)``) selects: identifiers that are neither a function
    call, a keyword, a label in ``by (...)``/``on (...)`` or a label matcher, nor a number."""
    expr = _LABEL_VALUES.sub(r"(\1)", expr)  # Grafana's label_values(selector, label)
    expr = _STRING.sub('""', expr)
    expr = _GRAFANA_VAR.sub("1m", expr)
    expr = _MATCHERS.sub("", expr)
    expr = _RANGE.sub("", expr)
    expr = _LABEL_LIST.sub(" ", expr)
    names = set()
    for m in _IDENT.finditer(expr):
        word, rest = m.group(), expr[m.end() :].lstrip()
        before = expr[: m.start()]
        if rest.startswith("("):
            continue  # a function (or aggregation) call
        if word.lower() in _KEYWORDS or re.search(r"[0-9.]$", before):
            continue  # a keyword, or the tail of a number / duration such as 1e3, 5m
        names.add(word)
    return names


def recorded_names() -> set[str]:
    return {r["record"] for r in rules() if "record" in r}


# -- the binaries ----------------------------------------------------------------------------


@functools.cache
def prometheus_binaries() -> tuple[str, str] | str:
    """(promtool, prometheus) paths, installing them if missing and possible; else the reason
    they are not there."""
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        done = subprocess.run(
            [str(ROOT / "bin/install-promtool.sh")], capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            return done.stderr.strip() or f"bin/install-promtool.sh exited {done.returncode}"
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    if promtool is None or prometheus is None:
        return "promtool/prometheus not on PATH after bin/install-promtool.sh"
    return promtool, prometheus


def require_prometheus() -> tuple[str, str]:
    """(promtool, prometheus), or skip the test saying why they cannot be had."""
    found = prometheus_binaries()
    if isinstance(found, str):
        pytest.skip(f"promtool/prometheus unavailable: {found}")
    return found
