"""Run ``bin/kafka-configs.sh`` against one node and check how it ended."""

import subprocess

from .node import ROOT, Node

CONFIGS = str(ROOT / "bin" / "kafka-configs.sh")


class ConfigsTool:
    """A node (``self.node``) and the tool pointed at it; subclasses set up the node."""

    node: Node

    def tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [CONFIGS, "--bootstrap-server", self.node.bootstrap, *args],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "Traceback" not in p.stderr, p.stderr
        return p

    def ok(self, *args: str) -> str:
        p = self.tool(*args)
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p.stdout

    def fails(self, *args: str, message: str) -> None:
        p = self.tool(*args)
        assert p.returncode == 1, f"{args}: expected exit 1, got {p.returncode}\n{p.stdout}"
        assert message in p.stderr, f"{args}: {message!r} not in stderr:\n{p.stderr}"
