// The plot of hoop-sim --plot: a matplotlib script run by /usr/bin/python3 on the JSON that
// hoop-sim writes (argv: JSON file, PNG file). Time and busbw against size, one line per
// algorithm and channel count, the tuner's pick of each size ringed.
#pragma once

namespace hoop::sim {

inline constexpr const char* kPlotScript = R"PY(
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

data = json.load(open(sys.argv[1]))
lines = {}
for row in data["rows"]:
    if not row.get("applicable"):
        continue
    name = row["algorithm"] + ("" if row["nchannels"] == 1 else " x%d" % row["nchannels"])
    lines.setdefault(name, []).append(row)
fig, (t_ax, bw_ax) = plt.subplots(1, 2, figsize=(13, 5))
for name, rows in lines.items():
    sizes = [r["size_bytes"] for r in rows]
    for ax, key in ((t_ax, "time_us"), (bw_ax, "busbw_gbps")):
        (line,) = ax.plot(sizes, [r[key] for r in rows], marker=".", label=name)
        picked = [r for r in rows if r.get("picked")]
        ax.scatter([r["size_bytes"] for r in picked], [r[key] for r in picked], s=90,
                   facecolors="none", edgecolors=line.get_color(), linewidths=1.5)
for ax, label in ((t_ax, "predicted time (us)"), (bw_ax, "bus bandwidth (GB/s)")):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size per rank (bytes)")
    ax.set_ylabel(label)
    ax.grid(True, which="both", alpha=0.3)
t_ax.set_yscale("log")
bw_ax.legend(fontsize=8, title="ringed: the pick")
fig.suptitle("hoop-sim %s: %d ranks on %d hosts, %s" % (data["collective"], data["ranks"], data["hosts"], data["dtype"]))
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
)PY";

}  // namespace hoop::sim
