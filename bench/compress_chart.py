#!/usr/bin/python3
"""Draws bench/netlab/compress's CSV: step time and bytes sent per step for every hook, one
group of bars per link rate.

  bench/compress_chart.py results/compress.csv docs/img/compress_netlab.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        rows = list(csv.DictReader(f))
    rates = list(dict.fromkeys(r["rate"] for r in rows))
    hooks = list(dict.fromkeys(r["hook"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(hooks)
    for ax, key, label, scale in ((axes[0], "step_ms", "step time (ms)", "linear"),
                                  (axes[1], "sent_kib", "KiB sent per step and rank (log)", "log")):
        for i, hook in enumerate(hooks):
            vals = [float(next(r[key] for r in rows if r["rate"] == rate and r["hook"] == hook))
                    for rate in rates]
            xs = [j + (i - (len(hooks) - 1) / 2) * width for j in range(len(rates))]
            ax.bar(xs, vals, width, label=hook)
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"4 hosts, {r}" for r in rates])
        ax.set_ylabel(label)
        ax.set_yscale(scale)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("hoop-train --hidden 2048,2048 (4.35M parameters): communication hooks on the lab")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
