"""One line on stderr for a node that cannot start: which config key, which address or path, why.

An operator whose port is taken or whose log dir is read-only needs the key to change, not a
40-line traceback. `describe` knows the failures start-up can expect; anything else (a bug) gets
``None`` and the caller logs its traceback.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from .config.server_config import ServerConfig
from .log.dir_lock import LogDirLockedError
from .metadata.bootstrap import BootstrapError
from .metrics.broker_metrics import MetricsServeError
from .network.server import KafkaServer


def reason(e: OSError) -> str:
    """``address already in use``, not ``[Errno 98] error while attempting to bind on ...``."""
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host ({e.strerror})"
    if e.errno is not None and e.errno in errno.errorcode:
        return os.strerror(e.errno).lower()
    return str(e)


def describe(e: BaseException, config: ServerConfig, server: KafkaServer | None) -> str | None:
    """The one-line reason start-up failed with ``e``; None for an unexpected failure.

    ``server`` is the node's listener server once start-up created it: the first listener it
    could not bind is the one that failed.
    """
    if isinstance(e, MetricsServeError):
        # a port taken or privileged is metrics.port's fault; an unknown address metrics.host's
        key = (
            "metrics.port" if e.cause.errno in (errno.EADDRINUSE, errno.EACCES) else "metrics.host"
        )
        return f"{key}: cannot listen on {e.host or '0.0.0.0'}:{e.port}: {reason(e.cause)}"
    if isinstance(e, LogDirLockedError):
        return f"log.dirs: {e}"
    if isinstance(e, BootstrapError):
        return f"metadata.log.dir: {e}"
    if isinstance(e, OSError) and server is not None:
        unbound = [lst for lst in server.listeners if lst.name not in server.bound_ports]
        if unbound:
            lst = unbound[0]
            return (
                f"listeners: cannot listen on {lst.name}://{lst.host or '0.0.0.0'}:{lst.port}: "
                f"{reason(e)}"
            )
    if isinstance(e, OSError) and e.filename is not None:
        path = Path(os.fsdecode(e.filename))
        where = _dir_key(path, config)
        return f"{where + ': ' if where else ''}{path}: {reason(e)}"
    return None


def _dir_key(path: Path, config: ServerConfig) -> str | None:
    """The config key naming the directory ``path`` is in."""
    for key, dirs in (
        ("log.dirs", config.log_dirs),
        ("metadata.log.dir", [config.metadata_log_dir]),
    ):
        if any(path == Path(d) or Path(d) in path.parents for d in dirs):
            return key
    return None
