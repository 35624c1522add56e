"""Refresh step 4, ACLs: the source's ACLs that ``mirror.acl.include`` selects (`acl_rules`)
are created here, and those this mirror created that the source no longer has (or the rules no
longer select) are deleted. A source without an authorizer is a skip, not an error. A
prefixed mirror stores topic (and, with the group prefix, group) ACLs under the prefixed names
(`mirror_names.acl_resource`).
"""

import dataclasses
import logging
from collections.abc import Mapping
from typing import Final

from ..controller import mirror_config
from ..metadata import mirror_names
from .core.acl_rules import AclRuleError, binding_from_codes, included, parse_acl_include
from .metadata_sync_interfaces import AclStore, SyncSource
from .metadata_sync_state import SyncReport
from .source import SourceError
from .sync_source import SECURITY_DISABLED

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")

DESCRIBE_ACLS: Final = 29


class AclSync:
    def __init__(self, report: SyncReport, acls: AclStore | None) -> None:
        self._report = report
        self._acls = acls

    async def sync(
        self,
        mirror: str,
        client: SyncSource,
        config: Mapping[str, str],
        versions: Mapping[int, tuple[int, int]],
    ) -> None:
        try:
            rules = parse_acl_include(config.get(mirror_config.ACL_INCLUDE))
        except AclRuleError as e:
            self._report.error(mirror, "acls", f"bad {mirror_config.ACL_INCLUDE}: {e}")
            return
        if DESCRIBE_ACLS not in versions:
            self._report.skip(mirror, "acls", "the source does not support DescribeAcls")
            return
        if self._acls is None:
            self._report.skip(mirror, "acls", "this broker has no ACL store")
            return
        try:
            source = await self._report.call(client.describe_acls())
        except SourceError as e:
            if e.code == SECURITY_DISABLED:
                self._report.skip(
                    mirror, "acls", "the source has no authorizer (SECURITY_DISABLED)"
                )
            else:
                self._report.error(mirror, "acls", str(e))
            return
        except Exception as e:
            self._report.error(mirror, "acls", f"DescribeAcls: {e or type(e).__name__}")
            return
        wanted = {
            a
            for a in source
            if included(
                rules,
                binding_from_codes(
                    a.resource_type,
                    a.resource_name,
                    a.operation,
                    a.permission_type,
                    a.principal,
                    a.host,
                ),
            )
        }
        naming = mirror_names.naming(config)
        if naming.prefix:  # the rules match the source's names; stored under ours
            wanted = {
                dataclasses.replace(a, resource_name=n, pattern_type=pt)
                for a in wanted
                for n, pt in [
                    mirror_names.acl_resource(
                        naming, a.resource_type, a.resource_name, a.pattern_type
                    )
                ]
            }
        out = await self._acls.sync_mirror_acls(mirror, wanted)
        for acl, why in out.refused:
            self._report.error(mirror, "acls", f"cannot store {acl.describe()}: {why}")
        if out.created or out.deleted:
            log.info(
                "mirror %s: ACLs synced from the source: %d created, %d deleted",
                mirror,
                len(out.created),
                len(out.deleted),
            )
