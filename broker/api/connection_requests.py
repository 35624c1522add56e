"""One request frame from a client connection: the SASL gate, the dispatcher, and when the
connection must close.

Kafka closes a connection that sends anything but ApiVersions and SASL before authenticating
(no response), a connection whose SASL exchange failed (a little after the error response, so
the client reads it), and one whose request it cannot even answer (unreadable header, unknown
api key, unsupported version). Other connections are never affected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from protocol.errors import ProtocolError

from .context import RequestContext
from .dispatcher import Dispatcher
from .sasl import SASL_AUTHENTICATE, SaslApi

log = logging.getLogger(__name__)


class ConnectionRequests:
    def __init__(
        self,
        dispatcher: Dispatcher,
        sasl: SaslApi,
        now_ms: Callable[[], int],
        failed_authentication_delay_ms: int,
    ) -> None:
        self._dispatcher = dispatcher
        self._sasl = sasl
        self._now_ms = now_ms
        self._failed_auth_delay_s = failed_authentication_delay_ms / 1000

    async def handle(self, conn: Any, frame: memoryview) -> Any:
        """The network server's handler: the response to ``frame``, or None (no answer)."""

        def make_ctx(header: Any) -> RequestContext:
            return RequestContext(
                header=header,
                connection_id=conn.connection_id,
                listener=conn.listener,
                peer_host=conn.peer_host,
                principal=conn.state["principal"],
                now_ms=self._now_ms(),
                session=conn.state,
                connection=conn,
            )

        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if not self._sasl.admit(conn.state, conn.listener, api_key, conn.peer_certificate):
            log.info(
                "closing connection %s: api key %d %s",
                conn.connection_id,
                api_key,
                "after its SASL session expired (connections.max.reauth.ms)"
                if self._sasl.authenticated(conn.state) or self._sasl.reauthenticating(conn.state)
                else "before SASL authentication",
            )
            conn.close(fatal=True)  # no response: the client sees the connection drop
            return None
        try:
            response = await self._dispatcher.handle(make_ctx, frame)
            if api_key == SASL_AUTHENTICATE and self._sasl.authenticated(conn.state):
                conn.authenticated()  # sasl.server.max.receive.size no longer applies
            if self._sasl.should_close(conn.state):
                # connection.failed.authentication.delay.ms after the error response; requests
                # meanwhile close it at once
                asyncio.get_running_loop().call_later(self._failed_auth_delay_s, conn.close)
            return response
        except ProtocolError as e:
            log.info("closing connection %s: %s", conn.connection_id, e)
            conn.close(fatal=True)  # requests pipelined after it are not answered
            return None
