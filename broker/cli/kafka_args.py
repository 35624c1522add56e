"""Command lines parsed as Kafka's argparse4j tools parse them (kafka-features, kafka-cluster,
kafka-transactions, kafka-producer-perf-test): a bad one prints the parser's usage and
``<prog>: error: <message>`` on stderr and exits 1, with argparse4j's wording where Python's
argparse words it differently; ``-h``/``--help`` prints the help and exits 0.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO


class ArgError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class HelpShown(Exception):
    pass


_REWRITES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"^the following arguments are required: command$"), lambda m: "too few arguments"),
    (
        re.compile(r"^the following arguments are required: ([^,]+)(,.*)?$"),
        lambda m: f"argument {m.group(1)} is required",
    ),
    (
        re.compile(r"^argument (\S+): invalid int value: '(.*)'$"),
        lambda m: (
            f"argument {m.group(1)}: could not convert '{m.group(2)}' to Integer "
            f'(For input string: "{m.group(2)}")'
        ),
    ),
    (
        re.compile(r"^argument (\S+): invalid float value: '(.*)'$"),
        lambda m: f"argument {m.group(1)}: could not convert '{m.group(2)}' to Double",
    ),
    (
        re.compile(r"^unrecognized arguments: (.*)$"),
        lambda m: f"unrecognized arguments: '{m.group(1)}'",
    ),
    (
        re.compile(r"^argument command: invalid choice: '?([^' ]*)'? \(choose from (.*)\)$"),
        lambda m: "invalid choice: '{}' (choose from {})".format(
            m.group(1), ", ".join(f"'{c.strip(chr(39))}'" for c in m.group(2).split(", "))
        ),
    ),
)


def argparse4j_message(message: str) -> str:
    for pattern, rewrite in _REWRITES:
        m = pattern.match(message)
        if m:
            return rewrite(m)
    return message


class KafkaParser(argparse.ArgumentParser):
    """Raises ArgError / HelpShown instead of exiting."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        raise ArgError(self, argparse4j_message(message))

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise HelpShown()


def parse(
    parser: argparse.ArgumentParser, argv: Sequence[str], out: TextIO, err: TextIO
) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code after printing help (0) or an error (1)."""
    saved = sys.stdout
    sys.stdout = out  # argparse prints help on sys.stdout
    try:
        return parser.parse_args(list(argv))
    except HelpShown:
        return 0
    except ArgError as e:
        err.write(e.parser.format_usage())
        print(f"{e.parser.prog}: error: {e}", file=err)
        return 1
    finally:
        sys.stdout = saved


def usage_error(parser: argparse.ArgumentParser, message: str, err: TextIO) -> int:
    """A check made after parsing, reported as argparse4j reports its own."""
    err.write(parser.format_usage())
    print(f"{parser.prog}: error: {message}", file=err)
    return 1
