"""Files of a segment replacement (the cleaner's output) and their crash recovery.

A replacement of segments ``[X .. Y]`` by one segment based at ``X`` goes through Kafka's
suffixes:

1. ``X.log.cleaned`` (+ ``.index``/``.timeindex``/``.txnindex`` ``.cleaned``) are written
   and fsynced by the cleaner.
2. Each ``.cleaned`` file is renamed ``.swap``, the log last: from here on the replacement is
   committed (``X.log.swap`` exists).
3. The old segments' files are renamed ``.deleted`` (removed after file.delete.delay.ms).
4. The ``.swap`` files are renamed to their final names, the log last.

At load (``complete_swaps``), before anything else: a ``X.log.swap`` wins over every old
segment it covers (bases in ``[X, its last offset]``), whose files are removed; its index
files are dropped so the segment is rebuilt (indexes from the log, .txnindex by the
producer-state replay), as Kafka does. ``.cleaned`` files and index ``.swap`` files without
their log are the leftovers of an unfinished clean: the caller deletes them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, iter_headers

CLEANED_SUFFIX: Final = ".cleaned"
SWAP_SUFFIX: Final = ".swap"
SEGMENT_SUFFIXES: Final = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)

log = logging.getLogger(__name__)


def segment_file(directory: Path, base_offset: int, suffix: str, extra: str = "") -> Path:
    return directory / f"{base_offset:020d}{suffix}{extra}"


def rename_suffix(directory: Path, base_offset: int, old: str, new: str) -> None:
    """Rename the segment's ``<suffix><old>`` files to ``<suffix><new>``, the log last."""
    for suffix in SEGMENT_SUFFIXES:
        src = segment_file(directory, base_offset, suffix, old)
        if src.exists():
            os.replace(src, segment_file(directory, base_offset, suffix, new))


def remove_staged(directory: Path, base_offset: int, extra: str) -> None:
    for suffix in SEGMENT_SUFFIXES:
        segment_file(directory, base_offset, suffix, extra).unlink(missing_ok=True)


def _last_offset(path: Path) -> int | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        last = None
        for header in iter_headers(fd, 0, os.fstat(fd).st_size):
            last = header.last_offset
        return last
    finally:
        os.close(fd)


def complete_swaps(directory: Path) -> list[int]:
    """Finish every committed replacement found in a partition directory; returns the base
    offsets of the segments swapped in (their indexes must be rebuilt)."""
    done = []
    tail = LOG_SUFFIX + SWAP_SUFFIX
    for swap in sorted(directory.glob("*" + tail)):
        stem = swap.name[: -len(tail)]
        if not stem.isdigit():
            continue
        base = int(stem)
        last = _last_offset(swap)
        upper = base if last is None else last
        for old in directory.glob("*" + LOG_SUFFIX):
            old_stem = old.name[: -len(LOG_SUFFIX)]
            if old_stem.isdigit() and base <= int(old_stem) <= upper:
                for suffix in SEGMENT_SUFFIXES:
                    segment_file(directory, int(old_stem), suffix).unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_file(directory, base, suffix).unlink(missing_ok=True)
            segment_file(directory, base, suffix, SWAP_SUFFIX).unlink(missing_ok=True)
        os.replace(swap, segment_file(directory, base, LOG_SUFFIX))
        log.warning("%s: completed the interrupted swap of segment %d", directory.name, base)
        done.append(base)
    return done
