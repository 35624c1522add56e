"""``python -m broker server.properties``: run one node in the foreground."""

import ctypes
import os
import sys

from .node_process import main

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _tune_malloc() -> None:
    """Let glibc reuse freed large request buffers instead of returning them to the kernel.

    By default every ~1 MiB Produce frame (and its log copy) is mmapped and unmapped, or the heap
    is trimmed and regrown, so each request pays hundreds of page faults: measured with
    bench/broker_bench.py, that doubled the node's system time. Up to 64 MiB of freed heap stays
    mapped instead. A no-op off glibc, or when the operator set the MALLOC_* variables.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 16 * 1024 * 1024)
    mallopt(_M_TRIM_THRESHOLD, 64 * 1024 * 1024)


_tune_malloc()
sys.exit(main())
