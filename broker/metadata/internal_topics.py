"""The topics the node's own coordinators keep their state in. Deleting one would take the
groups' offsets, the transactions, the share groups' state or the mirrors' partition states
with it, while the coordinators go on using it, so DeleteTopics refuses them (see
`controller.topic_requests`)."""

from typing import Final

from .mirror_states import MIRROR_STATE_TOPIC

INTERNAL_TOPICS: Final = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state", MIRROR_STATE_TOPIC}
)


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS
