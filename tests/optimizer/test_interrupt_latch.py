"""``run.InterruptLatch``: a Ctrl-C whose ``KeyboardInterrupt`` Python drops (raised inside a
garbage-collection callback) still stops the run at its next check."""

from __future__ import annotations

import signal
import sys
import weakref

import pytest

from optimizer.run import InterruptLatch


class _Key:
    """A weakly referenced object (what SQLAlchemy's weak dictionaries hold)."""


def _raise_interrupt(_: object) -> None:
    raise KeyboardInterrupt


@pytest.fixture
def default_sigint() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not at Python's default handler in this process")


@pytest.mark.usefixtures("default_sigint")
def test_a_ctrl_c_lost_in_a_gc_callback_is_raised_at_the_next_check() -> None:
    hook = sys.unraisablehook
    latch = InterruptLatch()
    with latch:
        key = _Key()
        ref = weakref.ref(key, _raise_interrupt)
        del key  # the callback's KeyboardInterrupt is "ignored": Python goes on
        assert ref() is None
        assert latch.hit
        with pytest.raises(KeyboardInterrupt):
            latch.check()
    assert sys.unraisablehook is hook
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("default_sigint")
def test_sigint_raises_and_is_remembered_only_inside_the_block() -> None:
    latch = InterruptLatch()
    latch.check()  # nothing yet
    with latch:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert latch.hit
    other = InterruptLatch()
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)  # Python's own handler again
    assert not other.hit


def test_other_unraisable_errors_still_reach_the_previous_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: seen.append(info.exc_value))

    def broken(_: object) -> None:
        raise ValueError("a callback's own bug")

    with InterruptLatch() as latch:
        key = _Key()
        ref = weakref.ref(key, broken)
        del key
        assert ref() is None
    assert not latch.hit
    assert [type(e) for e in seen] == [ValueError]
