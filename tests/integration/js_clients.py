"""kafkajs (Node.js) as a stock client: runs tests/js/client.mjs in real node processes.

`run_steps` runs one JSON command (a list of steps on one kafkajs client) and returns each step's
`{"ok": ...}` or `{"error": {...}}`; `Member` is a long-running consumer-group member whose JSON
events arrive on a queue. bin/setup.sh installs the locked kafkajs into tests/js/node_modules.
Every wait is bounded; processes are ended by their own PID only.
"""

import json
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any, TypeAlias

from .node import ROOT

JS_DIR = ROOT / "tests" / "js"
SCRIPT = JS_DIR / "client.mjs"
NODE = shutil.which("node")

Json: TypeAlias = Any
Event: TypeAlias = dict[str, Any]


def _installed() -> bool:
    return (JS_DIR / "node_modules" / "kafkajs" / "package.json").is_file()


def missing_reason() -> str | None:
    """Why kafkajs tests cannot run here (None when they can): only a missing node/npm skips;
    with both present an uninstalled kafkajs fails the tests (bin/setup.sh installs it)."""
    if NODE is None:
        return "node is not installed (apt-get install nodejs npm, then bin/setup.sh)"
    if not _installed() and shutil.which("npm") is None:
        return (
            "npm is not installed, so bin/setup.sh could not install kafkajs (apt-get install npm)"
        )
    return None


def _check_installed() -> str:
    assert NODE is not None, missing_reason()
    if not _installed():
        raise RuntimeError(f"kafkajs is not installed in {JS_DIR}: run bin/setup.sh")
    return NODE


def run_steps(
    bootstrap: str, steps: list[dict[str, Any]], timeout: float = 30, **options: Any
) -> list[Json]:
    """Run the steps on one kafkajs client; one result per step, in order."""
    node = _check_installed()
    cmd = {"bootstrap": bootstrap, "steps": steps, "deadlineMs": int(timeout * 1000), **options}
    proc = subprocess.run(
        [node, str(SCRIPT)],
        input=json.dumps(cmd).encode(),
        capture_output=True,
        timeout=timeout + 10,  # the script's own deadline fires first
        cwd=JS_DIR,
    )
    out = proc.stdout.decode(errors="replace").strip()
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0 or not out:
        raise AssertionError(f"client.mjs exited {proc.returncode}:\n{out}\n{err[-4000:]}")
    results: list[Json] = json.loads(out.splitlines()[-1])["results"]
    assert len(results) == len(steps), (results, err[-4000:])
    return results


def ok(result: Json) -> Json:
    """The value of a step that must have succeeded."""
    assert "error" not in result, f"kafkajs step failed: {result['error']}"
    return result["ok"]


def run_ok(bootstrap: str, steps: list[dict[str, Any]], **kw: Any) -> list[Json]:
    return [ok(r) for r in run_steps(bootstrap, steps, **kw)]


class Member:
    """One kafkajs consumer-group member in its own node process."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], deadline: float = 60) -> None:
        node = _check_installed()
        cmd = {
            "bootstrap": bootstrap,
            "deadlineMs": int(deadline * 1000),
            "member": {"groupId": group, "topics": topics},
        }
        self.events: queue.Queue[Event] = queue.Queue()
        self.seen: list[Event] = []
        self.proc = subprocess.Popen(
            [node, str(SCRIPT), json.dumps(cmd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=JS_DIR,
        )
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except json.JSONDecodeError:
                self.events.put({"event": "garbage", "line": line.decode(errors="replace")})

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def stderr_tail(self, n: int = 30) -> str:
        return b"".join(self._stderr[-n:]).decode(errors="replace")

    def wait_event(self, pred: Callable[[Event], bool], timeout: float, what: str) -> Event:
        """The next event matching pred (earlier ones stay in `seen`); crash events fail."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}; events: {self.seen[-10:]}\n"
                    f"{self.stderr_tail()}"
                )
            try:
                ev = self.events.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            self.seen.append(ev)
            assert ev["event"] not in ("crash", "garbage"), (ev, self.stderr_tail())
            if pred(ev):
                return ev

    def assignment(self, timeout: float, pred: Callable[[list[int]], bool]) -> list[int]:
        """Wait for an assignment (of the single subscribed topic) that satisfies pred."""
        ev = self.wait_event(
            lambda e: e["event"] == "assigned" and pred(self._parts(e)),
            timeout,
            "a matching assignment",
        )
        return self._parts(ev)

    @staticmethod
    def _parts(ev: Event) -> list[int]:
        return sorted(p for ps in ev["assignment"].values() for p in ps)

    def records(self, n: int, timeout: float) -> list[Event]:
        """The next n record events."""
        out: list[Event] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            out.append(
                self.wait_event(
                    lambda e: e["event"] == "record", max(left, 0.01), f"{n} records, got {out}"
                )
            )
        return out

    def stop(self, timeout: float = 15) -> None:
        """Leave the group cleanly (LeaveGroup); kill -9 only if it does not exit in time."""
        if self.proc.poll() is not None:
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"stop\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
