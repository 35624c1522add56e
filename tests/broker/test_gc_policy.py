"""GcPolicy: the collector's young generation and freezing what survives slow full collections."""

import gc
import weakref

from broker.gc_policy import GcPolicy


def test_install_sets_the_young_threshold_and_uninstall_restores() -> None:
    before = gc.get_threshold()
    policy = GcPolicy(young_threshold=12_345)
    policy.install()
    try:
        assert gc.get_threshold() == (12_345, before[1], before[2])
    finally:
        policy.uninstall()
    assert gc.get_threshold() == before and policy._on_gc not in gc.callbacks


def test_a_slow_full_collection_freezes_its_survivors_on_the_next_tick() -> None:
    policy = GcPolicy(slow_full_s=0.0)  # every full collection counts as slow
    policy.install()
    try:
        kept = [[i] for i in range(1000)]
        gc.collect(1)
        policy.tick()
        assert gc.get_freeze_count() == 0 and policy.freezes == 0  # a young one: nothing
        gc.collect()
        assert policy.pauses[2] >= 1 and policy.pause_s[2] > 0
        policy.tick()
        assert policy.freezes == 1 and gc.get_freeze_count() > len(kept)
        policy.tick()
        assert policy.freezes == 1  # once per slow collection
    finally:
        policy.uninstall()
    assert gc.get_freeze_count() == 0


def test_compact_reclaims_cycles_among_frozen_objects() -> None:
    policy = GcPolicy(slow_full_s=0.0, compact_interval_s=0.0)
    policy.install()
    try:

        class Node:
            other: "Node"

        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        gc.freeze()
        del a, b  # a cycle, frozen: full collections do not see it
        gc.collect()
        assert ref() is not None
        policy.tick()  # the interval has passed: compact
        assert ref() is None and policy.freezes == 1
    finally:
        policy.uninstall()
