#!/usr/bin/env python3
"""bench/figures.py - do the figures lntune stores and prints hold outside it?

For each tuned CPU shape of a database, puts what `lntune show --json` reports beside what
bench_cpu measured through the public API in the same state (its JSON records, --tuned --db of
the same database at the thread count it was tuned with), and checks issue 36's conditions:
  - show's GB/s within 10% of the bench's lntune tuned figure;
  - no stored ratio to the copy above 1.05;
  - tuned at least as fast as the built-in (the bench's lntune built-in, 3% noise allowed);
  - the ratios to the best copy and to the peers the bench measured.

  figures.py SHOW.json RECORDS.jsonl [SHOW.json RECORDS.jsonl ...] > table.md

Exit status 0 when every row passes, 1 otherwise (the table says which).
"""
import json
import sys

SHOW_TOLERANCE = 0.10
MAX_STORED_RATIO = 1.05
BUILTIN_NOISE = 0.03
PEERS = ("onednn", "onednn3", "torch")


def load_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def bench_figure(records, impl, op, rows, H, threads):
    for r in records:
        if (r["impl"] == impl and r["op"] == op and r["rows"] == rows and r["H"] == H
                and r["threads"] == threads and r["us"] > 0):
            return r
    return None


def best_copy(records, rows, H, threads):
    best = None
    for r in records:
        if (r["op"] == "copy" and r["rows"] == rows and r["H"] == H and r["threads"] == threads
                and r["us"] > 0 and (best is None or r["gbps"] > best)):
            best = r["gbps"]
    return best


def fmt(v, spec="%.1f"):
    return "n/a" if v is None else spec % v


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        sys.stderr.write(__doc__)
        return 2
    failures = 0
    print("| threads | op | shape | show GB/s | stored /copy | bench GB/s | bench/show | "
          "bench /copy | built-in GB/s | tuned/built-in | best peer | tuned/peer | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in range(1, len(argv), 2):
        with open(argv[k]) as f:
            shown = json.load(f)
        records = load_records(argv[k + 1])
        threads = max((r["threads"] for r in records), default=0)
        for s in shown:
            if s["target"] != "cpu" or s["direction"] != "forward" or s["dtype"] != "f32":
                continue
            op, rows, H = s["op"], s["rows"], s["H"]
            tuned = bench_figure(records, "lntune_tuned", op, rows, H, threads)
            builtin = bench_figure(records, "lntune_builtin", op, rows, H, threads)
            copy = best_copy(records, rows, H, threads)
            peers = [bench_figure(records, p, op, rows, H, threads) for p in PEERS]
            peers = [p for p in peers if p]
            peer = max(peers, key=lambda p: p["gbps"]) if peers else None
            stored_ratio = s["gbps"] / s["copy_gbps"] if s["copy_gbps"] > 0 else None
            agree = tuned["gbps"] / s["gbps"] if tuned and s["gbps"] > 0 else None
            vs_builtin = tuned["gbps"] / builtin["gbps"] if tuned and builtin else None
            problems = []
            if agree is None or abs(agree - 1.0) > SHOW_TOLERANCE:
                problems.append("show != bench")
            if stored_ratio is not None and stored_ratio > MAX_STORED_RATIO:
                problems.append("stored > 1.05x copy")
            if vs_builtin is not None and vs_builtin < 1.0 - BUILTIN_NOISE:
                problems.append("slower than built-in")
            failures += bool(problems)
            print("| %d | %s | %dx%d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                threads, op, rows, H, fmt(s["gbps"]), fmt(stored_ratio, "%.2fx"),
                fmt(tuned and tuned["gbps"]), fmt(agree, "%.2f"),
                fmt(tuned and copy and tuned["gbps"] / copy, "%.2fx"),
                fmt(builtin and builtin["gbps"]), fmt(vs_builtin, "%.2fx"),
                "%s %.1f" % (peer["impl"], peer["gbps"]) if peer else "n/a",
                fmt(tuned and peer and tuned["gbps"] / peer["gbps"], "%.2fx"),
                ", ".join(problems) if problems else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
