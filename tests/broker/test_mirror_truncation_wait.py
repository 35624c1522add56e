"""The rule of PREPARING's bounded wait for the replicas' LME truncation (sans-IO)."""

from broker.mirror.core.truncation_wait import Outcome, failure_reason, judge, waiting_note


def test_nobody_behind_is_truncated() -> None:
    assert judge([], under_min_isr=False, waited_s=999, timeout_s=60) == Outcome.TRUNCATED


def test_below_min_isr_retries_however_long_it_has_waited() -> None:
    assert judge([3], under_min_isr=True, waited_s=999, timeout_s=60) == Outcome.RETRY
    assert judge([], under_min_isr=True, waited_s=0, timeout_s=60) == Outcome.RETRY


def test_behind_waits_within_the_bound_and_fails_after_it() -> None:
    assert judge([2, 3], under_min_isr=False, waited_s=59.9, timeout_s=60) == Outcome.WAITING
    assert judge([2, 3], under_min_isr=False, waited_s=60, timeout_s=60) == Outcome.FAILED


def test_texts_name_the_replicas_and_the_config() -> None:
    assert "ISR members [3]" in waiting_note([3], False, 2.0)
    why = failure_reason([2], True, 60_000)
    assert why.startswith("replicas [2] did not complete the LME truncation")
    assert "mirror.truncation.timeout.ms=60000" in why and "remove the topic" in why
