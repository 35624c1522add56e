"""The client side of a refused node-to-node request: one line, then quiet retries.

A node whose peers refuse it (its principal lacks CLUSTER_ACTION on their cluster, so they answer
CLUSTER_AUTHORIZATION_FAILED, or TOPIC_AUTHORIZATION_FAILED to a follower's Fetch) keeps
retrying as it would after any error; without a word it would look like a hang. Each sender
(quorum, controller channel, broker-to-broker clients, replica fetchers) notes the error codes it
gets here: the first refusal by a peer of a request is logged at WARNING, naming the peer and the
request; the next answer that is not a refusal is logged once at INFO.
"""

import dataclasses
import logging
from typing import Any, Final

from kio.schema.errors import ErrorCode

log = logging.getLogger(__name__)

REFUSALS: Final[frozenset[int]] = frozenset(
    {int(ErrorCode.cluster_authorization_failed), int(ErrorCode.topic_authorization_failed)}
)


class PeerRefusals:
    def __init__(self, sender: str) -> None:
        """``sender``: which part of the node sends (``quorum``, ``controller channel``...)."""
        self._sender = sender
        self._refused: set[tuple[str, str]] = set()

    def note(self, peer: str, request: str, error_code: int) -> bool:
        """Note ``peer``'s answer to ``request``; True when it is a refusal."""
        key = (peer, request)
        if int(error_code) in REFUSALS:
            if key not in self._refused:
                self._refused.add(key)
                log.warning(
                    "%s: %s refused %s with %s: this node's principal needs CLUSTER_ACTION on "
                    "the cluster there (super.users or an ACL); retrying",
                    self._sender,
                    peer,
                    request,
                    ErrorCode(int(error_code)).name.upper(),
                )
            return True
        if key in self._refused:
            self._refused.discard(key)
            log.info("%s: %s now accepts %s", self._sender, peer, request)
        return False

    def refused(self) -> set[tuple[str, str]]:
        """(peer, request) pairs refused at the last answer."""
        return set(self._refused)


def answer_code(response: Any, depth: int = 8) -> int:
    """A refusal anywhere in a decoded response (WriteTxnMarkers refuses each partition), else
    its top-level error code (0 when it has none)."""
    found = _refusal_in(response, depth)
    if found:
        return found
    return int(getattr(response, "error_code", 0) or 0)


def _refusal_in(value: Any, depth: int) -> int:
    if depth < 0:
        return 0
    if isinstance(value, tuple | list):
        for item in value:
            if code := _refusal_in(item, depth - 1):
                return code
        return 0
    if not dataclasses.is_dataclass(value):
        return 0
    code = int(getattr(value, "error_code", 0) or 0)
    if code in REFUSALS:
        return code
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        nested = isinstance(item, tuple) and item and dataclasses.is_dataclass(item[0])
        if nested and (code := _refusal_in(item, depth - 1)):
            return code
    return 0


def api_name(spec_name: str) -> str:
    """Kafka's name of an API from the registry's (``fetch_snapshot`` -> ``FetchSnapshot``)."""
    return "".join(w.capitalize() for w in spec_name.split("_"))
