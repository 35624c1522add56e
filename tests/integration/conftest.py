from collections.abc import Iterator
from pathlib import Path

import pytest

from .node import Node


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "node1")
    n.start()
    yield n
    n.kill()
