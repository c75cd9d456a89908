#!/usr/bin/env python3
"""Writes the synthetic Mahimahi traces in this directory (seeded, so they are reproducible).

Each is one 10-second period of delivery opportunities (one line per 1500-byte opportunity, its
time in ms), whose capacity wanders like a cellular link's: a random walk of the rate, per 100 ms,
between a floor and a ceiling, with short outages. Mahimahi's own traces (e.g. its
Verizon-LTE-driving.down/.up) are used the same way: socklab bulk --link "trace FILE".
"""
import random

def trace(path, seed, mean_mbit, floor_mbit, ceil_mbit):
    rng = random.Random(seed)
    rate = mean_mbit
    lines = []
    for tick in range(100):  # 100 ticks of 100 ms
        rate += rng.gauss(0, mean_mbit * 0.25)
        rate = min(max(rate, floor_mbit), ceil_mbit)
        outage = rng.random() < 0.03
        per_ms = 0.0 if outage else rate * 1e6 / 8 / 1500 / 1000
        acc = 0.0
        for ms in range(100):
            acc += per_ms
            n = int(acc)
            acc -= n
            lines += [str(tick * 100 + ms + 1)] * n
    if not lines or lines[-1] != "10000":
        lines.append("10000")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")

trace("cell-down.trace", 19, 15.0, 1.0, 40.0)
trace("cell-up.trace", 20, 4.0, 0.5, 10.0)
