"""How an admin tool ends: an exit code and at most one line on stderr, never a traceback."""

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from .admin import CommandError, UsageError


def run_to_exit(
    run: Callable[[], Coroutine[Any, Any, object]],
    err: TextIO = sys.stderr,
    expected: tuple[type[Exception], ...] = (),
) -> int:
    """Run the tool's coroutine: 0, or 1 with the refusal (``expected``, a command or usage
    error) as its own line, or any other failure named in one line."""
    refusals: tuple[type[Exception], ...] = (*expected, CommandError, UsageError)
    try:
        asyncio.run(run())
        return 0
    except refusals as e:
        print(e, file=err)
        return 1
    except BrokenPipeError:
        return 1
    except Exception as e:  # no traceback for the operator: what failed, in one line
        print(f"{type(e).__name__}: {e}", file=err)
        return 1
