"""AlterUserScramCredentials in the controller: Kafka's validation rules, the stored credential
(never the salted password), and the records surviving the metadata-log framing into the image."""

import asyncio

from kio.schema.errors import ErrorCode

from broker.controller.controller import Controller, Validators
from broker.controller.scram import Deletion, ScramController, Upsertion
from broker.security import scram

from .test_controller_image import MemoryQuorum


def _setup() -> tuple[MemoryQuorum, ScramController]:
    q = MemoryQuorum()
    c = Controller(q, lambda: q.image, Validators(lambda k, v: v, lambda k, v: v), node_id=1)
    return q, ScramController(c)


def _upsert(name: str, mech: int = 2, iterations: int = 4096, pw: str = "pw") -> Upsertion:
    m = scram.BY_TYPE.get(mech, scram.SHA256)
    return Upsertion(name, mech, iterations, b"salt", scram.salted_password(m, pw, b"salt", 4096))


def test_upsert_stores_keys_that_verify_the_password() -> None:
    q, sc = _setup()
    res = asyncio.run(sc.alter([], [_upsert("alice"), _upsert("bob", mech=1)]))
    assert {(r.user, r.error) for r in res} == {("alice", ErrorCode.none), ("bob", ErrorCode.none)}
    cred = q.image.scram[("alice", 2)]
    assert cred.iterations == 4096 and cred.salt == b"salt"
    assert set(q.image.scram) == {("alice", 2), ("bob", 1)}
    # The stored credential authenticates the password through a full exchange.
    server = scram.ScramServer(scram.SHA512, lambda u, m: q.image.scram.get((u, m.type)))
    client = scram.ScramClient(scram.SHA512, "alice", "pw")
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    res = asyncio.run(sc.alter([Deletion("alice", 2)], []))
    assert res[0].error == ErrorCode.none and ("alice", 2) not in q.image.scram


def test_kafka_validation_rules() -> None:
    q, sc = _setup()
    asyncio.run(sc.alter([], [_upsert("carol")]))
    res = asyncio.run(
        sc.alter(
            [Deletion("ghost", 2), Deletion("carol", 2)],
            [
                _upsert("carol"),  # also deleted in this request
                _upsert("", iterations=4096),
                _upsert("few", iterations=4095),
                _upsert("many", iterations=16385),
                _upsert("odd", mech=3),
                _upsert("twice"),
                _upsert("twice", mech=1),
                _upsert("fine", iterations=16384),
            ],
        )
    )
    got = {r.user: (r.error, r.message) for r in res}
    assert got["ghost"][0] == ErrorCode.resource_not_found
    assert got["carol"][0] == ErrorCode.duplicate_resource
    assert got[""][0] == ErrorCode.unacceptable_credential
    assert got["few"] == (ErrorCode.unacceptable_credential, "Too few iterations")
    assert got["many"] == (ErrorCode.unacceptable_credential, "Too many iterations")
    assert got["odd"][0] == ErrorCode.unsupported_sasl_mechanism
    assert got["twice"][0] == ErrorCode.duplicate_resource
    assert got["fine"] == (ErrorCode.none, None)
    # Only the accepted change was committed; carol's credential is untouched.
    assert set(q.image.scram) == {("carol", 2), ("fine", 2)}
