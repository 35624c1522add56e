"""Runs one node as a process (``kafka-server-start.sh server.properties``, ``python -m broker``).

Loads server.properties, checks the log dirs are formatted for this node and one cluster, builds
the `Node` (`broker.app`) and runs it until SIGTERM/SIGINT. A signal stops it cleanly at any time,
start-up included (exit 0); a node that cannot start prints one line on stderr naming the config
key and why (exit 1).
"""

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata

from . import debug_stall
from .app import Node, StartupError
from .config.meta_properties import MetaPropertiesError, read_meta_properties
from .config.server_config import ConfigError, ServerConfig, load_server_config
from .gc_policy import GcPolicy
from .loop_watchdog import LoopWatchdog
from .security.errors import SecurityConfigError
from .security.listeners import ListenerSecurity, build_listener_security
from .security.node_links import build_node_links
from .startup_errors import describe as describe_startup_error
from .startup_progress import StartupProgress
from .stop_signals import StartupInterrupted, StopSignals
from .stop_watchdog import StopWatchdog

log = logging.getLogger("kmirror")


def check_storage(config: ServerConfig) -> str:
    """The cluster id shared by every formatted log dir; refuses unformatted or mismatched dirs."""
    cluster_ids = set()
    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    for d in dirs:
        try:
            meta = read_meta_properties(d)
        except (MetaPropertiesError, OSError) as e:
            raise StartupError(
                f"Log directory {d} is not formatted ({e}). Run: bin/kafka-storage.sh format -t <cluster-id> -c <server.properties>"
            ) from None
        if meta.node_id != config.node_id:
            raise StartupError(
                f"Log directory {d} belongs to node {meta.node_id}, but node.id is {config.node_id}"
            )
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) != 1:
        raise StartupError(f"Log directories belong to different clusters: {sorted(cluster_ids)}")
    return cluster_ids.pop()


GC_TICK_S = 1.0
STOP_DURING_STARTUP_TIMEOUT_S = 10.0  # bound on cancelling start-up and closing what it opened
USAGE = "USAGE: kafka-server-start.sh server.properties"
HELP = f"""{USAGE}
Runs one kmirror node in the foreground. Format its log dirs first:
  kafka-storage.sh format -t <cluster-id> -c server.properties
SIGTERM or SIGINT stop it cleanly at any time, start-up included: exit 0.
A node that cannot start prints one line on stderr (the config key and why) and exits 1.
Options:
  --help      this text
  --version   the kmirror version
"""


def _start_step(node: Node) -> str:
    """What `Node.start` is doing, for the start-up progress log (read from another thread)."""
    if node.server is None:
        return "replaying the metadata log"
    return "starting the listeners and registering the broker"


async def _close_unstarted(node: Node) -> None:
    """Close what a failed or cancelled start-up opened (listeners, logs), within a bound."""
    try:
        await asyncio.wait_for(node.stop(), STOP_DURING_STARTUP_TIMEOUT_S)
    except Exception as e:  # the start-up's own failure is what the operator needs to see
        log.warning("closing the node after start-up ended early: %s", str(e) or type(e).__name__)


def _failure(e: BaseException, config: ServerConfig, node: Node | None) -> StartupError:
    why = describe_startup_error(e, config, node.server if node is not None else None)
    if why is None:  # not a failure start-up expects: keep the traceback, in the log
        log.error("start-up failed", exc_info=e)
        why = f"start-up failed: {type(e).__name__}: {e}"
    return StartupError(why)


async def run(
    config: ServerConfig,
    cluster_id: str,
    listener_security: Mapping[str, ListenerSecurity] | None = None,
    signals: StopSignals | None = None,
) -> None:
    """Run the node until ``signals`` report SIGTERM/SIGINT (installed here if not given).

    A signal during start-up cancels it, closes what it opened and returns normally, as a stop
    after start-up does (the process exits 0 either way). A start-up failure closes what was
    opened and raises `StartupError` with one line naming the config key and the reason.
    """
    if signals is None:
        signals = StopSignals()
        signals.install()
    progress = StartupProgress()
    stalls = LoopWatchdog()
    stalls.start()
    gc_policy = GcPolicy()
    gc_policy.install()
    gc_ticks = asyncio.ensure_future(_every(GC_TICK_S, gc_policy.tick))
    try:
        await _run(config, cluster_id, listener_security, signals, progress)
    finally:
        gc_ticks.cancel()
        gc_policy.uninstall()
        stalls.stop()


async def _every(interval_s: float, tick: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(interval_s)
        tick()


async def _run(
    config: ServerConfig,
    cluster_id: str,
    listener_security: Mapping[str, ListenerSecurity] | None,
    signals: StopSignals,
    progress: StartupProgress,
) -> None:
    node: Node | None = None
    try:
        dirs = ", ".join(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        with progress.step(f"recovering the logs in {dirs}"):
            node = Node(config, cluster_id, listener_security)
        stop = asyncio.Event()
        signals.attach(asyncio.get_running_loop(), stop.set)
        start = asyncio.ensure_future(node.start())
        stopped = asyncio.ensure_future(stop.wait())
        with progress.step(lambda: _start_step(node)):
            await asyncio.wait({start, stopped}, return_when=asyncio.FIRST_COMPLETED)
    except Exception as e:
        raise _failure(e, config, node) from e
    finally:
        progress.close()
    if not start.done():
        sig = signals.received.name if signals.received is not None else "stop signal"
        log.info("%s during start-up: cancelling it", sig)
        start.cancel()
        await asyncio.wait({start}, timeout=STOP_DURING_STARTUP_TIMEOUT_S)
        await _close_unstarted(node)
        return
    stopped.cancel()
    failure = asyncio.CancelledError() if start.cancelled() else start.exception()
    if failure is not None:
        await _close_unstarted(node)
        raise _failure(failure, config, node) from failure
    maintenance = asyncio.create_task(node.maintenance())
    await stop.wait()
    log.info("shutting down")
    maintenance.cancel()
    watchdog = StopWatchdog()
    watchdog.arm()
    try:
        await node.stop()
    finally:
        watchdog.disarm()


def _version() -> str:
    try:
        return metadata.version("kmirror")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _logger_levels(spec: str) -> None:
    """``KMIRROR_LOG_LEVELS=broker.replication=DEBUG,broker.mirror=DEBUG``: per-logger levels
    (Kafka's log4j logger lines, for the node's own modules)."""
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, _, level = item.partition("=")
        if not level or not isinstance(logging.getLevelName(level.upper()), int):
            log.warning("KMIRROR_LOG_LEVELS: ignored %r (want <logger>=<level>)", item)
            continue
        logging.getLogger(name.strip()).setLevel(level.upper())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(HELP, end="")
        return 0
    if args and args[0] == "--version":
        print(_version())
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 1
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stdout,
    )
    _logger_levels(os.environ.get("KMIRROR_LOG_LEVELS", ""))
    # From here SIGTERM/SIGINT stop the node at any point (broker/stop_signals.py).
    signals = StopSignals()
    signals.install()
    debug_stall.install_from_env()  # tests only: SIGUSR1 stalls the loop when asked for
    try:
        return _start_and_run(args[0], signals)
    except StartupInterrupted as e:
        log.info("%s during start-up: stopped", signal.Signals(e.signum).name)
        return 0
    finally:
        signals.restore()


def _start_and_run(config_path: str, signals: StopSignals) -> int:
    """0 after a stop signal; 1, after one line on stderr, when the node cannot start."""
    try:
        config, warnings = load_server_config(config_path)
    except ConfigError as e:
        print(f"kmirror: {e}", file=sys.stderr)
        return 1
    for w in warnings:
        log.warning(w)
    try:
        listener_security = build_listener_security(config)
        links = build_node_links(config)  # Node builds its own; this checks them up front
    except SecurityConfigError as e:
        print(f"kmirror: {config.source}: {e}", file=sys.stderr)
        return 1
    for w in links.warnings:
        log.warning("%s: %s", config.source, w)
    try:
        cluster_id = check_storage(config)
        import uvloop

        started = time.monotonic()
        uvloop.run(run(config, cluster_id, listener_security, signals))
    except StartupError as e:
        print(f"kmirror: {e}", file=sys.stderr)
        return 1
    log.debug("ran for %.1fs", time.monotonic() - started)
    return 0
