"""Java check, Spark session set-up, and shipping our packages to the executors."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17
DEFAULT_MASTER = "local[*]"


class EnvironmentProblem(RuntimeError):
    """Java or pyspark is missing; the message says what to install."""


def java_major_version() -> int:
    """The major version of the ``java`` Spark will run (JAVA_HOME first, then PATH)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise EnvironmentProblem(
            f"Spark needs Java {MIN_JAVA} or newer, but no `java` was found "
            f"({'JAVA_HOME=' + home if home else 'not on PATH, JAVA_HOME unset'}); "
            f"install it (e.g. apt-get install openjdk-{MIN_JAVA}-jre-headless)"
        )
    try:
        run = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"cannot run `{java} -version`: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', run.stderr + run.stdout)
    if match is None:
        raise EnvironmentProblem(f"cannot read the Java version from `{java} -version`")
    major = int(match[1])
    if major == 1 and match[2]:  # "1.8.0" style
        major = int(match[2])
    return major


def check_java() -> None:
    major = java_major_version()
    if major < MIN_JAVA:
        raise EnvironmentProblem(
            f"Spark needs Java {MIN_JAVA} or newer; `java -version` reports {major}"
        )


def _zip_package(package: str, into: Path) -> Path:
    module = sys.modules.get(package) or __import__(package)
    src = Path(module.__file__ or "").parent
    target = into / f"{package}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(src.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, str(Path(package) / path.relative_to(src)))
    return target


def ship_packages(spark: SparkSession) -> None:
    """Executors of a real cluster have no access to our venv: send them the code as zips.

    Third-party modules the scan imports (crc32c, msgspec and the codec libraries protocol
    loads) must be installed on the executors; see docs/audit.md.
    """
    into = Path(tempfile.mkdtemp(prefix="kmirror-audit-pyfiles-"))
    # The driver serves the zips to executors until the session ends; remove them at exit.
    atexit.register(shutil.rmtree, into, True)
    for package in ("protocol", "audit"):
        spark.sparkContext.addPyFile(str(_zip_package(package, into)))


def start_session(master: str | None, app_name: str = "kafka-mirror-audit") -> SparkSession:
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise EnvironmentProblem(
            "pyspark is not installed: pip install 'pyspark>=4.0,<5' (the audit extra)"
        ) from exc
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # started by spark-submit
    if master is None and not submitted:
        master = DEFAULT_MASTER
    if master is None:
        # Under spark-submit the master comes from its flags: connect to its JVM, read them.
        SparkContext._ensure_initialized()
    effective = master or SparkConf().get("spark.master", DEFAULT_MASTER) or DEFAULT_MASTER
    if effective.startswith("local"):
        # Local workers run this interpreter, so they see the same packages.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ship_packages(spark)
    return spark
