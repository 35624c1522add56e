"""What the Kafka-compatible tools built on joptsimple's conventions share (kafka-topics.sh,
kafka-get-offsets.sh, kafka-log-dirs.sh, kafka-delete-records.sh, the console clients): the
option table and its help, the parse, and how Kafka's tools end.

Kafka's tools end in three ways besides success, and scripts see the difference:
``printUsageAndExit`` (the message, then the whole help, on stderr, exit 1) is `Usage`; an
``IllegalArgumentException`` or a tool's own check (one line on stderr, exit 1) is `Fatal`; and
a failure while running is printed by each tool its own way (`Failed`: the text as given, on the
stream it names).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from broker.cli.admin import UsageError, version
from broker.cli.consumer_groups_options import Option, build_parser, render_help

__all__ = ["Failed", "Fatal", "Option", "Tool", "Usage", "parse_int", "validate_bootstrap"]


class Usage(Exception):
    """CommandLineUtils.printUsageAndExit: the message and the help on stderr, exit 1."""


class Fatal(Exception):
    """One line on stderr, exit 1."""


class Failed(Exception):
    """A failure while running, printed as the tool prints it (``text`` on ``stdout`` or
    stderr), exit ``code``."""

    def __init__(self, text: str, stdout: bool = False, code: int = 1) -> None:
        super().__init__(text)
        self.text, self.stdout, self.code = text, stdout, code


@dataclass
class Tool:
    """One tool's option table and messages.

    ``intro``: the line joptsimple's help starts with (after --help). ``no_args``: what an empty
    command line prints before the help (None: the intro). ``parse_failure``: how a
    joptsimple error (an unknown option, a missing argument) ends, given its message.
    """

    intro: str
    options: list[Option]
    repeated: set[str] = field(default_factory=set)
    no_args: str | None = None
    parse_failure: Callable[[str], Exception] = Usage

    @property
    def help(self) -> str:
        return render_help(self.intro, self.options)

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        parser = build_parser("kafka", self.options, self.repeated)
        try:
            return parser.parse_args(list(argv))
        except UsageError as e:
            raise self.parse_failure(str(e)) from None

    def main(
        self,
        argv: Sequence[str] | None,
        out: TextIO,
        err: TextIO,
        start: Callable[[argparse.Namespace], int],
    ) -> int:
        """``--help`` (stdout, exit 0), ``--version``, no arguments (the help on stderr, exit 1),
        then ``start``; every way of failing becomes Kafka's output and exit code."""
        args_list = list(sys.argv[1:] if argv is None else argv)
        try:
            if not args_list:
                raise Usage(self.no_args or self.intro)
            args = self.parse(args_list)
            if getattr(args, "help", False):
                print(self.help, end="", file=out)
                return 0
            if getattr(args, "version", False):
                print(version(), file=out)
                return 0
            return start(args)
        except Usage as e:
            print(str(e), file=err)
            print(render_help("", self.options).lstrip("\n"), end="", file=err)
            return 1
        except Fatal as e:
            print(str(e), file=err)
            return 1
        except Failed as e:
            print(e.text, file=out if e.stdout else err)
            return e.code
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:  # stdout closed early (| head): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except Exception as e:  # a failure nothing above names: one line, never a traceback
            print(f"ERROR {type(e).__name__}: {e}", file=err)
            return 1


def validate_bootstrap(value: str | None) -> None:
    """ToolsUtils.validateBootstrapServer (its messages end with a blank line)."""
    if value is None or not value.strip():
        raise Usage("Error while validating the bootstrap address\n")
    for entry in value.split(","):
        _host, sep, port = entry.rpartition(":")
        if not sep or not port.isdigit():
            raise Usage("Please provide valid host:port like host1:9091,host2:9092\n")


def parse_int(value: str | None, option: str, bits: int = 32) -> int | None:
    """joptsimple's conversion of an Integer (or Long) option's argument."""
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        n = None
    if n is None or not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
        raise Usage(f"Cannot parse argument '{value}' of option {option}")
    return n
