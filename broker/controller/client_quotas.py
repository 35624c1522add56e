"""AlterClientQuotas in the controller: validate each entity's ops, commit ClientQuotaRecords.

Kafka's rules (its ClientQuotaControlManager): an entity named twice in one request fails the
second time ("Ignoring duplicate entity"), a key twice in one entity's ops fails that entity; the
entity must be valid (see ``broker.metadata.client_quotas.check_entity``) and each value valid for
its key (``check_value``); a removal of a key that is not set writes nothing, and a value equal to
the current one writes nothing. Every error is INVALID_REQUEST with Kafka's message. The records
of all the valid entities commit as one batch (none with ``validate_only``).
"""

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.metadata_records import latest_type

from ..metadata.client_quotas import Entity, check_entity, check_value, entity_key
from .controller import Controller

ClientQuotaRecord = latest_type("ClientQuotaRecord")
_EntityData = sys.modules[ClientQuotaRecord.__module__].EntityData


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: tuple[tuple[str, str | None], ...]  # as the request lists it
    ops: tuple[tuple[str, float | None], ...]  # (key, value); None: remove the key


@dataclass(frozen=True, slots=True)
class EntityResult:
    entity: tuple[tuple[str, str | None], ...]
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    """How Kafka's ClientQuotaEntity prints in its messages."""
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def plan(current: Any, alterations: Sequence[Alteration]) -> tuple[list[EntityResult], list[Any]]:
    """The result for each alteration and the records of those that are valid, against
    ``current`` (entity -> {key: value})."""
    results: list[EntityResult] = []
    records: list[Any] = []
    seen: set[Entity] = set()
    for alt in alterations:
        key = entity_key(alt.entity)
        bad = _check(alt, key in seen)
        seen.add(key)
        if bad is None:
            bad = check_entity(alt.entity)
        new: list[Any] = []
        if bad is None:
            have = current.get(key, {})
            parts = tuple(_EntityData(entity_type=t, entity_name=n) for t, n in key)
            for k, v in alt.ops:
                if v is None:
                    if k in have:
                        new.append(ClientQuotaRecord(entity=parts, key=k, value=0.0, remove=True))
                    continue
                bad = check_value(key, k, v)
                if bad is not None:
                    break
                if have.get(k) != v:
                    new.append(ClientQuotaRecord(entity=parts, key=k, value=v, remove=False))
        if bad is not None:
            results.append(EntityResult(alt.entity, ErrorCode.invalid_request, bad))
        else:
            results.append(EntityResult(alt.entity))
            records.extend(new)
    return results, records


def _check(alt: Alteration, duplicate: bool) -> str | None:
    keys: set[str] = set()
    for k, _ in alt.ops:
        if k in keys:
            return (
                f"Duplicate quota key {k} not updating quota for this entity "
                f"{_entity_text(alt.entity)}"
            )
        keys.add(k)
    if duplicate:
        return f"Ignoring duplicate entity {_entity_text(alt.entity)}"
    return None


class ClientQuotaController:
    def __init__(self, controller: Controller) -> None:
        self._c = controller

    async def alter(
        self, alterations: Sequence[Alteration], validate_only: bool
    ) -> list[EntityResult]:
        async with self._c.lock:
            results, records = plan(self._c.current_image().client_quotas, alterations)
            if records and not validate_only:
                await self._c.commit(records)
        return results
