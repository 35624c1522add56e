"""Fault runs write every append through the log writer thread (``KMIRROR_WRITER_INLINE_BYTES=0``):
at their load almost every append would otherwise go straight to the file, and a kill must be
proven against the path a busy node takes, where acknowledged bytes may still be queued."""

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _every_append_through_the_writer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KMIRROR_WRITER_INLINE_BYTES", "0")
    yield
