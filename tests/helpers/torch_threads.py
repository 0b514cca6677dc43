"""For test modules that run PyTorch on the CPU, here and in the children they start: import
`one_torch_thread` into the module (autouse) and every test there runs torch on one thread."""
from __future__ import annotations

import sys

import pytest


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread for torch here and in every child (OMP_NUM_THREADS, inherited).

    The suite's workers share the machine's cores and the tiny models gain nothing from a second
    thread: with more, OpenMP's waiting threads spin on the cores the other worker needs, which
    costs more CPU than the whole tiny run (torchrun sets the same for its ranks). Module-scoped
    and autouse, so it is in place before any module fixture starts a child."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        torch = sys.modules.get("torch")
        before = torch.get_num_threads() if torch is not None else None
        if torch is not None:
            torch.set_num_threads(1)
        yield
        if torch is not None and before is not None:
            torch.set_num_threads(before)
