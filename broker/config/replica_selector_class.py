"""``replica.selector.class`` (KIP-392): which selectors a node accepts at start-up."""

from __future__ import annotations

from typing import Final

RACK_AWARE_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
KNOWN_SELECTORS: Final = (RACK_AWARE_SELECTOR,)


def check_selector_class(name: str | None) -> str | None:
    """The configured selector, or None for leader-only reads (unset or empty); ValueError
    names the problem for any other class (no Java class can be loaded into this broker)."""
    if name is None or not name.strip():
        return None
    name = name.strip()
    if name not in KNOWN_SELECTORS:
        raise ValueError(
            f"unknown replica selector {name!r}: the only one is {RACK_AWARE_SELECTOR} "
            "(leave it unset for reads from the leader only)"
        )
    return name
