"""DescribeUserScramCredentials v0 and AlterUserScramCredentials v0 (KIP-554).

Describe lists, per user, the mechanisms (1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512) and iteration
counts of its credentials, never salts or keys; all users when the request names none; a user
named twice gets DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND. Alter goes through the
controller (broker.controller.scram), which stores UserScramCredentialRecords in the metadata
log. Authorization as Kafka: DESCRIBE / ALTER on the cluster.
"""

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.scram import Deletion, ScramController, Upsertion
from ..security.acls import AclOperation
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

DESCRIBE, ALTER = 50, 51


class ScramCredentialsApi:
    def __init__(self, services: Services, controller: ScramController) -> None:
        self.s = services
        self.controller = controller

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(50, self.describe, max_version=0),
            Api(51, self.alter, max_version=0),
        ]

    async def describe(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(DESCRIBE).response_type(ctx.api_version)
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.DESCRIBE):
            return build(
                cls,
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": None,
                    "results": [],
                },
            )
        creds = self.s.image().scram
        by_user: dict[str, list[dict[str, int]]] = {}
        for (user, mechanism), cred in sorted(creds.items()):
            by_user.setdefault(user, []).append(
                {"mechanism": mechanism, "iterations": cred.iterations}
            )
        if not req.users:
            wanted = {u: False for u in by_user}
        else:
            wanted = {}
            for u in req.users:
                wanted[u.name] = u.name in wanted  # True: named twice
        results = []
        for user, twice in wanted.items():
            if twice:
                results.append(
                    {
                        "user": user,
                        "error_code": ErrorCode.duplicate_resource,
                        "error_message": "Cannot describe SCRAM credentials for the same user "
                        f"twice in a single request: {user}",
                        "credential_infos": [],
                    }
                )
            elif user not in by_user:
                results.append(
                    {
                        "user": user,
                        "error_code": ErrorCode.resource_not_found,
                        "error_message": "Attempt to describe a user credential that does not "
                        f"exist: {user}",
                        "credential_infos": [],
                    }
                )
            else:
                results.append(
                    {
                        "user": user,
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        "credential_infos": by_user[user],
                    }
                )
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.none,
                "error_message": None,
                "results": results,
            },
        )

    async def alter(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(ALTER).response_type(ctx.api_version)
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.ALTER):
            users = dict.fromkeys(
                [*(d.name for d in req.deletions), *(u.name for u in req.upsertions)]
            )
            return build(
                cls,
                {
                    "throttle_time": 0,
                    "results": [
                        {
                            "user": u,
                            "error_code": ErrorCode.cluster_authorization_failed,
                            "error_message": None,
                        }
                        for u in users
                    ],
                },
            )
        results = await self.controller.alter(
            [Deletion(d.name, int(d.mechanism)) for d in req.deletions],
            [
                Upsertion(
                    u.name,
                    int(u.mechanism),
                    int(u.iterations),
                    bytes(u.salt),
                    bytes(u.salted_password),
                )
                for u in req.upsertions
            ],
        )
        return build(
            cls,
            {
                "throttle_time": 0,
                "results": [
                    {"user": r.user, "error_code": r.error, "error_message": r.message}
                    for r in results
                ],
            },
        )
