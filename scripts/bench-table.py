#!/usr/bin/env python3
"""Prints criterion medians of `cargo bench -p fraghash` as Markdown tables.

Each benchmark runs a batch of 1,024 lookups; the tables show nanoseconds
per lookup (the median of criterion's samples divided by 1,024).
Usage: scripts/bench-table.py [TARGET_DIR]
"""
import json
import pathlib
import sys

BATCH = 1024
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target") / "criterion"


def median_ns(path):
    est = json.loads((path / "new" / "estimates.json").read_text())
    return est["median"]["point_estimate"] / BATCH


for group in ["locate", "key_locate"]:
    base = root / group
    if not base.is_dir():
        continue
    rows = {}
    counts = set()
    for bench in sorted(p for p in base.iterdir() if p.is_dir() and p.name != "report"):
        for param in bench.iterdir():
            if (param / "new" / "estimates.json").exists():
                rows.setdefault(bench.name, {})[int(param.name)] = median_ns(param)
                counts.add(int(param.name))
    counts = sorted(counts)
    print(f"\n{group}: ns per lookup (criterion median)\n")
    print("| scheme | " + " | ".join(f"{n:,}" for n in counts) + " |")
    print("|---" * (len(counts) + 1) + "|")
    order = sorted(rows, key=lambda s: (s.startswith("peer"), s))
    for name in order:
        cells = [f"{rows[name][n]:.2f}" if n in rows[name] else "-" for n in counts]
        print(f"| {name} | " + " | ".join(cells) + " |")

kh = root / "key_hash"
if kh.is_dir():
    print("\nkey_hash: ns per key (criterion median)\n")
    print("| key bytes | ns |\n|---|---|")
    for p in sorted((p for p in kh.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        print(f"| {p.name} | {median_ns(p):.2f} |")
