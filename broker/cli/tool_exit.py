"""How an admin tool ends: an exit code and at most one line on stderr, never a traceback."""

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO

from .admin import CommandError, UsageError
from .kafka_args import parse


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


def parse_and_run(
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, object]],
    argv: Sequence[str] | None,
    out: TextIO,
    err: TextIO,
    expected: tuple[type[Exception], ...] = (),
) -> int:
    """A tool's whole ``main``: Kafka's flag parsing (its exit code on a bad flag or --help),
    then `run_to_exit` of ``run(args, out)``."""
    args = parse(parser, sys.argv[1:] if argv is None else argv, out, err)
    if isinstance(args, int):
        return args
    return run_to_exit(lambda: run(args, out), err, expected)
