#!/usr/bin/env python3
"""bench/incumbent_drift.py - how the planner's drift reference (gen/tune/incumbent.c) keeps its scale.

Simulates a search's batches the way gen/tune/tuner.c times them: the best candidates get faster for
a while (15 ms down to 1 ms), then many time within 8% of each other; every batch drifts by +-30%
and every figure carries its noise; a candidate's figure is its ratio to the incumbent in its
batch times the incumbent's estimate. Two kinds of run: the search's batches (4 candidates,
figures +-3%) and --rigor exhaustive's (64 candidates, +-10%). For each scheme it prints the
mean and spread over RUNS runs of the late figures against the early ones on the plateau (1.000:
the same scale; below it, later figures read faster than they are).
  usage: bench/incumbent_drift.py [RUNS]
"""
import random
import statistics
import sys

SCHEMES = {  # name: (anchor, margin, confirm)
    "no anchor, no margin (the old scheme)": (False, 0.0, False),
    "no anchor, 20% margin": (False, 0.20, False),
    "anchor, no margin": (True, 0.0, False),
    "anchor, 10% margin": (True, 0.10, False),
    "anchor, 10% margin, kept only if confirmed": (True, 0.10, True),
    "anchor, 20% margin (gen/tune/incumbent.c)": (True, 0.20, False),
}


def run(scheme, seed, per_batch, noise, batches):
    anchor, margin, confirm = scheme
    rnd = random.Random(seed)
    incumbent = None  # (true time, estimate)
    waiting = None  # the anchor: (true time, estimate)
    ratios = []  # figure / true time, in the order measured
    for b in range(batches):
        best = max(1000.0, 15000.0 * 0.82**b)
        true = [best * (1 + 0.08 * rnd.random()) for _ in range(per_batch)]
        drift = 0.7 + 0.6 * rnd.random()

        def measure(t):
            return t * drift * (1 + noise * (2 * rnd.random() - 1))

        if incumbent is None:
            figures = true[:]  # against the copy: the scale of the true times
        else:
            ref = measure(incumbent[0])
            scale = incumbent[1]
            if waiting is not None:
                scale = waiting[1] * ref / measure(waiting[0])
                confirmed = not confirm or scale < waiting[1] * (1 - margin)
                incumbent = (incumbent[0], scale) if confirmed else waiting
                waiting = None
            figures = [measure(t) / ref * scale for t in true]
        for t, f in zip(true, figures):
            ratios.append(f / t)
            if incumbent is None or f < incumbent[1] * (1 - margin):
                if incumbent is not None and anchor and waiting is None:
                    waiting = incumbent
                incumbent = (t, f)
    n = len(ratios)
    return statistics.mean(ratios[-n // 4:]) / statistics.mean(ratios[n // 3:n // 2])


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    for label, per_batch, noise, batches in (("search", 4, 0.03, 45),
                                             ("exhaustive", 64, 0.10, 80)):
        print(f"{label}: {batches} batches of {per_batch}, figures +-{noise:.0%}")
        for name, scheme in SCHEMES.items():
            late = [run(scheme, seed, per_batch, noise, batches) for seed in range(runs)]
            print(f"  {name}: late/early {statistics.mean(late):.3f} "
                  f"(sd {statistics.pstdev(late):.3f})")


if __name__ == "__main__":
    main()
