"""The event kernel every simulation runs on (see ``kernel.py``)."""

from simulator.core.kernel import Handler, Kernel

__all__ = ["Handler", "Kernel"]
