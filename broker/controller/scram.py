"""AlterUserScramCredentials in the controller: validate, turn salted passwords into the stored
credential, commit UserScramCredentialRecord / RemoveUserScramCredentialRecord.

Kafka's rules: a user may appear once per request (deletion or upsertion; a second mention fails
both with DUPLICATE_RESOURCE); empty user names and 4096 > iterations > 16384 are
UNACCEPTABLE_CREDENTIAL; unknown mechanisms UNSUPPORTED_SASL_MECHANISM; deleting a credential that
does not exist RESOURCE_NOT_FOUND. The accepted changes of one request commit as one batch.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.metadata_records import latest_type

from ..security import scram
from .controller import Controller

UserScramCredentialRecord = latest_type("UserScramCredentialRecord")
RemoveUserScramCredentialRecord = latest_type("RemoveUserScramCredentialRecord")


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _check_name_and_mechanism(name: str, mechanism: int) -> UserResult | None:
    if not name:
        return UserResult(name, ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in scram.BY_TYPE:
        return UserResult(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


class ScramController:
    def __init__(self, controller: Controller) -> None:
        self._c = controller

    async def alter(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> list[UserResult]:
        async with self._c.lock:
            img = self._c.current_image()
            errors: dict[str, UserResult] = {}
            deletes: dict[str, Deletion] = {}
            upserts: dict[str, Upsertion] = {}
            duplicate = "A user credential cannot be altered twice in the same request"
            for d in deletions:
                if d.name in errors:
                    continue
                if deletes.pop(d.name, None) is not None:
                    errors[d.name] = UserResult(d.name, ErrorCode.duplicate_resource, duplicate)
                    continue
                bad = _check_name_and_mechanism(d.name, d.mechanism)
                if bad is None and (d.name, d.mechanism) not in img.scram:
                    bad = UserResult(
                        d.name,
                        ErrorCode.resource_not_found,
                        "Attempt to delete a user credential that does not exist",
                    )
                if bad is not None:
                    errors[d.name] = bad
                else:
                    deletes[d.name] = d
            for u in upsertions:
                if u.name in errors:
                    continue
                if deletes.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
                    errors[u.name] = UserResult(u.name, ErrorCode.duplicate_resource, duplicate)
                    continue
                bad = _check_name_and_mechanism(u.name, u.mechanism)
                if bad is None and u.iterations < scram.MIN_ITERATIONS:
                    bad = UserResult(
                        u.name, ErrorCode.unacceptable_credential, "Too few iterations"
                    )
                elif bad is None and u.iterations > scram.MAX_ITERATIONS:
                    bad = UserResult(
                        u.name, ErrorCode.unacceptable_credential, "Too many iterations"
                    )
                if bad is not None:
                    errors[u.name] = bad
                else:
                    upserts[u.name] = u
            records: list[Any] = [
                RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism)
                for d in deletes.values()
            ]
            for u in upserts.values():
                cred = scram.credential_from_salted(
                    scram.BY_TYPE[u.mechanism], u.salted_password, u.salt, u.iterations
                )
                records.append(
                    UserScramCredentialRecord(
                        name=u.name,
                        mechanism=u.mechanism,
                        salt=cred.salt,
                        stored_key=cred.stored_key,
                        server_key=cred.server_key,
                        iterations=cred.iterations,
                    )
                )
            await self._c.commit(records)
        return [
            *(UserResult(n) for n in deletes),
            *(UserResult(n) for n in upserts),
            *errors.values(),
        ]
