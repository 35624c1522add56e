"""The admin connection of the tools that take ``--bootstrap-server`` or
``--bootstrap-controller`` (kafka-features, kafka-cluster): a session to one of the given nodes
and, for controller-only requests sent to controllers, to the active controller (found with
DescribeCluster on the controller listener, KIP-919, as Kafka's admin client does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from broker.cli.admin import CommandError, Session, UsageError, code

DESCRIBE_CLUSTER: Final = 60
NOT_CONTROLLER: Final = 41
CONTROLLER_ENDPOINTS: Final = 2


def addresses(flag: str, value: str) -> list[tuple[str, int]]:
    out = []
    for entry in (e.strip() for e in value.split(",")):
        host, sep, port = entry.rpartition(":")
        if not entry or not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"Invalid url in {flag}: {entry}")
        out.append((host.strip("[]") or "localhost", int(port)))
    return out


class ClusterAdmin:
    def __init__(
        self, targets: list[tuple[str, int]], props: Mapping[str, str], controllers: bool, tool: str
    ) -> None:
        self.targets = targets
        self.props = props
        self.controllers = controllers
        self.tool = tool
        self._session: Session | None = None
        self._active: Session | None = None

    async def session(self) -> Session:
        if self._session is None:
            what = "the controllers" if self.controllers else "the cluster"
            self._session = await Session.open(self.targets, self.props, self.tool, what)
        return self._session

    async def controller_session(self) -> Session:
        """Where controller requests go: any broker (it forwards them), or the active
        controller when talking to controllers."""
        first = await self.session()
        if not self.controllers:
            return first
        if self._active is not None:
            return self._active
        resp = await first.call(
            DESCRIBE_CLUSTER,
            {"include_cluster_authorized_operations": False, "endpoint_type": CONTROLLER_ENDPOINTS},
        )
        if code(resp.error_code):
            raise CommandError(resp.error_message or "DescribeCluster failed")
        active = int(resp.controller_id)
        for b in resp.brokers:
            if int(b.broker_id) == active:
                here = (first.conn.host, first.conn.port)
                if (str(b.host), int(b.port)) == here:
                    self._active = first
                else:
                    self._active = await Session.open(
                        [(str(b.host), int(b.port))], self.props, self.tool, "the active controller"
                    )
                return self._active
        raise CommandError("no active controller is known")

    async def call_controller(self, api_key: int, fields: dict[str, Any]) -> Any:
        return await (await self.controller_session()).call(api_key, fields)

    def close(self) -> None:
        for s in (self._active, self._session):
            if s is not None:
                s.close()
