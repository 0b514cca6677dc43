"""Micro-batches inside one training iteration: gradient accumulation runs K forwards and backwards
(K losses) before one optimizer step; each micro-batch's forward launches the first one's kernels."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import is_backward, is_loss

LOSS_RUN = 8  # loss kernels at most this far apart are one loss (log-softmax, then NLL)


class Micro(NamedTuple):
    starts: list[int]  # template positions where each micro-batch begins ([0]: no gradient accumulation)
    lead: int  # where the first one's own forward begins (the step's own kernels before it)


ONE = Micro([0], 0)


def micro_starts(template: np.ndarray, op_names: list[str]) -> Micro:
    """Template positions where each micro-batch begins ([0] alone without gradient accumulation),
    and where the first one's own forward begins (after the step's own kernels before it: a Trainer
    counts every micro-batch's tokens first).

    The losses before the backward's last kernel are the micro-batches (the forward's loss kernels,
    each followed by a backward); the i-th micro-batch's forward is the kernels before its loss that
    equal those before the first loss, and begins after a backward. Anything less regular stays one."""
    names = [op_names[int(c)] for c in template.tolist()]
    backward = [i for i, x in enumerate(names) if is_backward(x)]
    if not backward:
        return ONE
    losses: list[int] = []
    for i, x in enumerate(names[:backward[-1]]):
        if not is_loss(x) or is_backward(x):  # a loss's gradient (log_softmax_backward) is the backward's
            continue
        if not losses or i - losses[-1] > LOSS_RUN:
            losses.append(i)
        else:
            losses[-1] = i
    if len(losses) < 2:
        return ONE
    starts, lead = [0], 0
    for prev, loss in zip(losses, losses[1:]):
        # the forward that ends in this loss is the first one's, kernel for kernel: back from the two
        # losses while they agree (the first micro-batch may begin with the step's own kernels before it)
        same = 0
        while same <= losses[0] and template[losses[0] - same] == template[loss - same]:
            same += 1
        start = loss - same + 1
        if start <= prev or not any(prev < b < start for b in backward):
            return ONE  # no backward between the two losses: no accumulation found
        starts.append(start)
        lead = max(lead, losses[0] - same + 1)
    return Micro(starts, lead)


def per_micro_batch(record: list[dict], iterations: int, k: int) -> bool:
    """Whether the capture's record (STEM.steps.json's steps) clocked each of k micro-batches, not each
    iteration: k entries an iteration (a Lightning Callback's on_train_batch_start/end under
    accumulate_grad_batches fires once a micro-batch)."""
    return k > 1 and len(record) == k * iterations


def regrouped(record: list[dict], names: list[str], k: int) -> list[dict]:
    """The record one entry an iteration, named as the iterations are: its k entries' seconds and phases
    summed (each entry's own time: the gaps between micro-batches are in none), their own names kept."""
    out = []
    for i, name in enumerate(names):
        part = record[i * k:(i + 1) * k]
        phases: dict[str, float] = {}
        for entry in part:
            for ph, v in (entry.get("phases") or {}).items():
                if isinstance(v, (int, float)):
                    phases[ph] = phases.get(ph, 0.0) + v
        seconds = [float(x) for x in (e.get("seconds") for e in part) if isinstance(x, (int, float))]
        out.append({"name": name, "seconds": sum(seconds) if len(seconds) == len(part) else None,
                    "phases": phases, "clocked": [e.get("name") for e in part]})
    return out
