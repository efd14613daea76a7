"""What the lessons' experiments gave over many runs: seeds, threads and CPU kernels.

A small model trained from a seed, or a random draw, ends somewhere else on another seed, with
another number of threads, or on a processor whose kernels add up in another order. A lesson's
text cannot quote one such run as *the* result: a learner's run gives other numbers. So the
course reruns each experiment whose conclusion the text draws from a trained model or a random
draw, over several seeds, one thread and two, with the CPU kernels pinned to AVX2 and with the
machine's own (``make bench BENCH_FLAGS="--only experiments"``), and keeps what every run gave in
a record, one file per lesson beside this one (``<lesson>.json``). The lesson prints the spread
from the record, which reads the same on every machine, and then where the learner's own run
falls::

    from attention_ref.experiments import experiment

    ablations = experiment("lesson08", "ablations")
    print(ablations.spread("paper"))              # mean 100% (range 100% to 100%)
    print(ablations.place("paper", my_accuracy))  # within the record's range

Standard library only: it runs in the learner's kernel, wherever the library does.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections import Counter
from pathlib import Path

RECORDS = Path(__file__).resolve().parent  # <lesson>.json, beside this file


@functools.cache
def _load(lesson: str) -> dict:
    path = RECORDS / f"{lesson}.json"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in RECORDS.glob("*.json"))) or "none"
        raise LookupError(f"no record of experiments for {lesson!r} (records: {known})")
    return json.loads(path.read_text(encoding="utf-8"))


def experiment(lesson: str, name: str) -> Experiment:
    """The record of experiment ``name`` of ``lesson`` (e.g. "lesson08", "ablations")."""
    found = _load(lesson).get("experiments", {})
    if name not in found:
        raise LookupError(f"{lesson} has no recorded experiment {name!r}: {sorted(found)}")
    return Experiment(lesson, name, found[name])


def significant(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant digits, without an exponent: 28,000, 890, 6.9, 0.041."""
    rounded = float(f"{value:.{digits}g}")
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}"
    plain = f"{rounded:.{digits}g}"
    return plain if "e" not in plain else f"{rounded:f}".rstrip("0")


def _condition(run: dict) -> str:
    kernels = "pinned" if run["pinned"] else "unpinned"
    return f"{kernels}, {run['threads']} thread{'s' * (run['threads'] != 1)}"


class Experiment:
    """One experiment's runs: every quantity's value in every run (seed x condition)."""

    def __init__(self, lesson: str, name: str, record: dict):
        self.lesson, self.name, self.record = lesson, name, record
        self.runs = record["runs"]

    def values(self, quantity: str) -> list:
        """The quantity's value in every run, in the record's order."""
        if quantity not in self.record["quantities"]:
            known = sorted(self.record["quantities"])
            raise LookupError(f"{self.name} records no quantity {quantity!r}: {known}")
        return [run["values"][quantity] for run in self.runs]

    def format(self, quantity: str, value) -> str:
        """``value`` written the way the record writes ``quantity``: a ``str.format`` pattern
        ("{:.0%}": "85%"), or "sigN", N significant digits as a person writes them (28,000, 6.9)."""
        pattern = self.record["quantities"][quantity].get("format", "{}")
        if pattern.startswith("sig") and pattern[3:].isdigit():
            return significant(value, int(pattern[3:]))
        return pattern.format(value)

    def mean(self, quantity: str) -> float:
        return statistics.fmean(self.values(quantity))

    def low(self, quantity: str):
        return min(self.values(quantity))

    def high(self, quantity: str):
        return max(self.values(quantity))

    def spread(self, quantity: str) -> str:
        """'mean 85% (range 63% to 100%)': the mean and range over every run."""
        low = self.format(quantity, self.low(quantity))
        high = self.format(quantity, self.high(quantity))
        return f"mean {self.format(quantity, self.mean(quantity))} (range {low} to {high})"

    def counts(self, quantity: str) -> list[tuple[object, int]]:
        """Each value the quantity took (a generated line, a yes or no) and in how many runs,
        the most frequent first."""
        values = [json.dumps(v) if isinstance(v, list) else v for v in self.values(quantity)]
        return Counter(values).most_common()

    def runs_where(self, condition) -> str:
        """'23 of 24 runs': in how many runs ``condition(values)`` holds, ``values`` being the
        run's {quantity: value}."""
        held = sum(bool(condition(run["values"])) for run in self.runs)
        return f"{held} of {len(self.runs)} runs"

    def place(self, quantity: str, value) -> str:
        """Where a run's ``value`` falls among the record's runs, in words."""
        low, high, n = self.low(quantity), self.high(quantity), len(self.runs)
        if value < low:
            return f"below every one of the record's {n} runs"
        if value > high:
            return f"above every one of the record's {n} runs"
        below = sum(v < value for v in self.values(quantity))
        return f"within the record's range, above {below} of its {n} runs"

    def describe(self) -> str:
        """How the record was made: the runs, seeds and conditions."""
        seeds = self.record["seeds"]
        conditions = sorted({_condition(run) for run in self.runs})
        return (
            f"{len(self.runs)} runs: {len(seeds)} seeds ({', '.join(map(str, seeds))}) under "
            f"{len(conditions)} conditions ({'; '.join(conditions)})"
        )
