"""A log directory has one owner: a second LogManager, node or format on it is refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from broker.log.clock import SystemClock
from broker.log.config import LogConfig
from broker.log.dir_lock import LOCK_FILE, DirLock, LogDirLockedError
from broker.log.manager import LogManager

ROOT = Path(__file__).resolve().parents[2]


def test_second_manager_on_a_dir_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    first = LogManager([tmp_path / "a", tmp_path / "b"], LogConfig(), SystemClock())
    with pytest.raises(LogDirLockedError, match=str(tmp_path / "b")):
        LogManager([tmp_path / "c", tmp_path / "b"], LogConfig(), SystemClock())
    # the refused manager released what it had taken: "c" is free
    DirLock.acquire(tmp_path / "c").release()
    first.close()
    second = LogManager([tmp_path / "a", tmp_path / "b"], LogConfig(), SystemClock())
    second.close()


def test_the_error_names_the_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys
                from pathlib import Path
                from broker.log.dir_lock import DirLock
                DirLock.acquire(Path({str(tmp_path)!r}))
                print("locked", flush=True)
                sys.stdin.read()
            """),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(LogDirLockedError) as info:
            DirLock.acquire(tmp_path)
        assert f"pid {holder.pid}" in str(info.value)
        assert str(tmp_path / LOCK_FILE) in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    DirLock.acquire(tmp_path).release()  # the lock died with its holder


def _config(tmp_path: Path) -> Path:
    text = (ROOT / "config/server.properties").read_text()
    f = tmp_path / "server.properties"
    f.write_text(text.replace("/tmp/kmirror-logs", str(tmp_path / "logs")))
    return f


def test_format_refuses_a_directory_in_use(tmp_path: Path) -> None:
    lock = DirLock.acquire(_mk(tmp_path / "logs"))
    try:
        done = subprocess.run(
            [
                str(ROOT / "bin/kafka-storage.sh"),
                "format",
                "-t",
                "MkU3OEVBNTcwNTJENDM2Qk",
                "-c",
                str(_config(tmp_path)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done
        assert "in use by another process" in done.stderr and str(tmp_path / "logs") in done.stderr
        assert not (tmp_path / "logs/meta.properties").exists()
    finally:
        lock.release()


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
