"""Producer state upkeep: bringing a ``ProducerStateManager`` up to the log end (newest snapshot,
then the batches after it replayed) and rewriting stale ``.txnindex`` entries on the way.
"""

from __future__ import annotations

import bisect
from typing import Final

from protocol.records import scan_batches
from protocol.txn_index import AbortedTxn

from ..producer_state import CompletedTxn, ProducerStateManager
from .read import ReadMixin
from .state import log

_REPLAY_CHUNK: Final = 8 << 20


class ProducerReplayMixin(ReadMixin):
    """Producer state replay; it reads the log through ``ReadMixin.read``."""

    def load_producer_state(self, psm: ProducerStateManager) -> int:
        """Attach ``psm`` and bring it up to the log end; returns how many batches it replayed.

        The newest usable snapshot is loaded (written per segment roll and at clean shutdown),
        then the batches after it are replayed, headers only (control batches are tiny and
        parsed). If recovery found segments whose .txnindex may lag the log (past the
        recovery point after an unclean shutdown, or a repaired index), the replay starts at
        or below the first of them and rewrites their entries from the markers it meets.
        """
        self.producer_state = psm
        return self._reload_producer_state(psm, rebuild_txn_index=True)

    def _reload_producer_state(self, psm: ProducerStateManager, *, rebuild_txn_index: bool) -> int:
        start = psm.truncate_and_reload(self._log_start, self._leo)
        stale = self._txn_index_stale_from if rebuild_txn_index else None
        if stale is not None and stale < start:
            start = psm.reload_at_or_below(stale, self._log_start)
        if rebuild_txn_index and start < self._leo:
            for seg in self._segments:
                seg.txn_index.truncate_to(start)
        replayed = self._replay(psm, start, rebuild_txn_index)
        psm.update_map_end_offset(self._leo)
        if rebuild_txn_index:
            self._txn_index_stale_from = None
        psm.on_high_watermark_updated(self._hw)
        if replayed:
            log.info("%s: producer state rebuilt from %d batches", self.name, replayed)
        return replayed

    def _replay(self, psm: ProducerStateManager, offset: int, with_txn_index: bool) -> int:
        end = self._leo
        replayed = 0
        while offset < end:
            result = self.read(offset, _REPLAY_CHUNK, upper_bound=end)
            progressed = False
            for buf in result.records:
                for batch in scan_batches(buf, verify_crc=False, allow_partial_tail=True):
                    if batch.last_offset < offset:
                        continue
                    done = psm.replay_batch(batch)
                    if with_txn_index and done is not None and done.is_aborted:
                        seg = self._segments[bisect.bisect_right(self._bases, done.last_offset) - 1]
                        seg.txn_index.append(aborted_txn(done))
                    offset = batch.last_offset + 1
                    replayed += 1
                    progressed = True
            if not progressed:
                break
        return replayed


def aborted_txn(txn: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)
