"""Attach a `ProducerStateManager` to a partition log, rebuilding its state from disk.

The newest usable snapshot (written on clean shutdown) is loaded, then every batch after it is
replayed from batch headers (control batches are tiny and parsed). Without a snapshot the whole
log is replayed, which is what makes idempotent dedupe survive a kill -9.
"""

import logging
from typing import Any

from protocol.records import scan_batches

from .clock import Clock
from .producer_state import ProducerStateManager

log = logging.getLogger(__name__)

READ_CHUNK = 8 << 20


def attach_producer_state(plog: Any, clock: Clock) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, clock)
    end = plog.log_end_offset
    offset = psm.truncate_and_reload(plog.log_start_offset, end)
    replayed = 0
    while offset < end:
        result = plog.read(offset, READ_CHUNK, upper_bound=end)
        if not result.records:
            break
        progressed = False
        for buf in result.records:
            for batch in scan_batches(buf, allow_partial_tail=True):
                if batch.last_offset < offset:
                    continue
                psm.replay_batch(batch)
                offset = batch.last_offset + 1
                replayed += 1
                progressed = True
        if not progressed:
            break
    psm.update_map_end_offset(end)
    plog.producer_state = psm
    if replayed:
        log.info("%s: producer state rebuilt from %d batches", plog.dir.name, replayed)
    return psm


def snapshot_producer_state(plog: Any) -> None:
    psm = plog.producer_state
    if isinstance(psm, ProducerStateManager) and psm.producer_count:
        psm.take_snapshot(plog.log_end_offset)
