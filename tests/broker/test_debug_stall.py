"""The test-only SIGUSR1 stall: installed only when asked for, refusing a bad length."""

import os
import signal
import time

import pytest

from broker import debug_stall


@pytest.fixture
def restore_sigusr1():  # type: ignore[no-untyped-def]
    previous = signal.getsignal(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, previous)


def test_unset_installs_nothing(restore_sigusr1: None) -> None:
    before = signal.getsignal(signal.SIGUSR1)
    assert debug_stall.install_from_env({}) is None
    assert signal.getsignal(signal.SIGUSR1) is before


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "1.5"])
def test_a_bad_length_is_ignored_with_a_warning(
    raw: str, restore_sigusr1: None, caplog: pytest.LogCaptureFixture
) -> None:
    before = signal.getsignal(signal.SIGUSR1)
    assert debug_stall.install_from_env({debug_stall.ENV: raw}) is None
    assert signal.getsignal(signal.SIGUSR1) is before
    assert f"{debug_stall.ENV}={raw!r} ignored" in caplog.text


def test_sigusr1_stalls_the_calling_thread(restore_sigusr1: None) -> None:
    assert debug_stall.install_from_env({debug_stall.ENV: "300"}) == 300
    t0 = time.monotonic()
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(10):  # the handler runs at the next bytecode of this (the main) thread
        pass
    assert time.monotonic() - t0 >= 0.29
