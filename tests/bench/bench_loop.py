"""Benchmark (not a test): how many steps per second the agent loop runs with the simulated model.

Runs every scenario under every preset ``--repeats`` times in this process, through the SDK and the
simulated transport, with a recorder that only counts, and prints steps per second overall and per
scenario. Progress is printed as it goes.

    .venv/bin/python tests/bench/bench_loop.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agents.policies import PRESETS
from agents.run import run_scenario
from agents.scenarios import scenario_names


class Counting:
    """Counts steps (sub-agents' too) and keeps nothing."""

    def __init__(self, counts: Counter, key: str) -> None:
        self.counts = counts
        self.key = key

    def run_started(self, start) -> None:
        self.counts["runs"] += 1

    def step_recorded(self, step) -> None:
        self.counts["steps"] += 1
        self.counts[self.key] += 1

    def run_finished(self, end) -> None:
        self.counts[f"stop:{end.stop_reason}"] += 1

    def child(self, *, label: str) -> Counting:
        return self


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each scenario x preset (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats: expected a whole number of at least 1")

    scenarios = scenario_names()
    counts: Counter = Counter()
    seconds: Counter = Counter()
    total_runs = len(scenarios) * len(PRESETS) * args.repeats
    began = time.perf_counter()
    done = 0
    for scenario in scenarios:
        for policy in PRESETS:
            for seed in range(args.repeats):
                t0 = time.perf_counter()
                run_scenario(scenario, policy, recorder=Counting(counts, scenario), seed=seed)
                seconds[scenario] += time.perf_counter() - t0
                done += 1
        print(f"  {done}/{total_runs} runs  ({scenario})", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - began

    print(
        f"simulated model, {total_runs} top-level runs ({counts['runs']} with sub-agents), "
        f"{counts['steps']} steps in {elapsed:.2f}s"
    )
    print(f"loop throughput: {counts['steps'] / elapsed:,.0f} steps/second, {total_runs / elapsed:,.0f} runs/second")
    for scenario in scenarios:
        print(f"  {scenario:24} {counts[scenario] / seconds[scenario]:>8,.0f} steps/s")


if __name__ == "__main__":
    main()
