"""A step's own time against the loop's time between steps, for the views that show the step's
period (the range tree's iteration row, `p`, `?`). No Textual here.

The period (a step's start to the next one's, parsers.model.steps.StepTimes) is what a step costs
the loop; its own time runs from its start to its work's end, and the rest is the loop's between
steps (the next batch's fetch and copy, a trainer's hooks, logging). A Python clock taken inside
the loop (a trainer's batch hooks) reads the own time, so the period alone would read long against
it. Shown only where the loop's share is visible (`VISIBLE_SHARE` of the period); both figures are
on the capture's clock (nsys's timeline), means over the steady steps that finished.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.render import numbers

VISIBLE_SHARE = 0.05  # the loop's time between steps, as a share of the period, worth a line of its own


@dataclass(frozen=True)
class StepClock:
    steps: int
    period_ns: float  # mean: each step's start to the next one's
    own_ns: float  # mean: its start to its work's end
    between_ns: float  # mean: the loop's time between steps (period = own + between)
    python_ns: float | None = None  # the workload's own clock, mean over the same steps (None: not recorded)
    python_reads: str | None = None  # "own" or "period": which figure the Python clock reads like

    @property
    def visible(self) -> bool:
        return self.steps > 0 and self.between_ns > VISIBLE_SHARE * self.period_ns

    def _ms(self, ns: float) -> str:
        return numbers.ms(ns)

    def short(self) -> str:
        """One clause for a row's first line: `period 45.48 = own 38.79 + 6.69 between (ms/step)`."""
        return (f"period {self._ms(self.period_ns)} = own {self._ms(self.own_ns)} + "
                f"{self._ms(self.between_ns)} between (ms/step)")

    def python_text(self) -> str:
        if self.python_ns is None:
            return ""
        reads = {"own": "reads own: taken inside the step", "period": "reads the period: around the loop"}
        return f"Python's clock {self._ms(self.python_ns)} ms" + (
            f" {reads[self.python_reads]}" if self.python_reads in reads else "")

    def sentence(self) -> str:
        """The figures and what each covers (capture's clock, means over the steps)."""
        py = self.python_text()
        return (f"period {self._ms(self.period_ns)} ms/step (mean, start to next start) = own "
                f"{self._ms(self.own_ns)} (start to its work's end) + {self._ms(self.between_ns)} between "
                f"steps (the loop's: next batch's fetch and copy, hooks)" + (f" · {py}" if py else ""))


def step_clock(model: RangeModel) -> StepClock | None:
    """The finished steady steps' period, own time and time between, with the Python clock where the
    capture recorded one; None without finished steps."""
    from nsight_tui.parsers.analyses.questions import timing

    found = steps_of(model)
    times = found.times(found.finished)
    if not times.n:
        return None
    t = timing(model.trace, model)
    python = t.python_step_mean_ns
    return StepClock(times.n, float(times.period_ns.mean()), float((times.period_ns - times.between_ns).mean()),
                     float(np.mean(times.between_ns)), float(python) if python else None,
                     t.python_clock_covers)


@dataclass(frozen=True)
class DiedSteps:
    """The iterations the run died in (parsers.model.steps.Steps.died): no steps."""

    ids: frozenset[int]  # range positions
    names: tuple[str, ...]  # as the tree shows them (`step_0`, `inferred:step_5`)
    finished: int  # the steady steps that did finish

    def text(self) -> str:
        """`no step finished: step_0 died (out of GPU memory)`, or how many finished before."""
        who = ", ".join(self.names)
        head = "no step finished" if not self.finished else f"{self.finished} step{'s' if self.finished != 1 else ''} " \
            "finished"
        return f"{head}: {who} died (out of GPU memory)"


def died_steps(model: RangeModel) -> DiedSteps | None:
    from nsight_tui.parsers.read import conventions

    found = steps_of(model)
    died = found.died
    if not len(died):
        return None
    texts = model.trace.range_texts.objects
    domains = model.trace.range_domains.objects
    names = tuple(f"{conventions.INFERRED_DOMAIN}:{texts[i]}" if domains[i] == conventions.INFERRED_DOMAIN
                  else str(texts[i]) for i in died.tolist())
    return DiedSteps(frozenset(int(i) for i in died.tolist()), names, len(found.finished))
