"""Where a stop hangs: if the node has not stopped ``after_s`` seconds after it began, log
every pending asyncio task with its stack (a coroutine waiting forever), and have faulthandler
dump every thread's stack (the event loop itself blocked in a call) to stderr."""

import asyncio
import faulthandler
import io
import logging
import sys
from typing import Final

log = logging.getLogger(__name__)

DEFAULT_AFTER_S: Final = 15.0


class StopWatchdog:
    def __init__(self, after_s: float = DEFAULT_AFTER_S) -> None:
        self._after_s = after_s
        self._task: asyncio.Task[None] | None = None

    def arm(self) -> None:
        faulthandler.dump_traceback_later(self._after_s + 1, exit=False, file=sys.stderr)
        self._task = asyncio.get_running_loop().create_task(self._report())

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        if self._task is not None:
            self._task.cancel()

    async def _report(self) -> None:
        await asyncio.sleep(self._after_s)
        me = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        lines = []
        for task in pending:
            out = io.StringIO()
            task.print_stack(limit=8, file=out)
            lines.append(out.getvalue().rstrip())
        log.warning(
            "still stopping after %.0f s; %d pending tasks:\n%s",
            self._after_s,
            len(pending),
            "\n".join(lines),
        )
