"""The storm at several sizes: one line on how its cost grows, and a PNG of it.

The exponent k of `cost ~ size^k` is fitted on logarithms (conformance.storm): k near 1
is linear growth; the time line uses pods, the memory line nodes (KWOK's cost is per node).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from pvchaos.conformance.storm import fitted_exponent
from pvchaos.kit.storm import StormResult


def growth_line(results: Sequence[StormResult]) -> str:
    """How cost grows over the sizes run, in one line."""
    pods = [r.pods for r in results]
    nodes = [r.nodes for r in results]
    k_time = fitted_exponent(pods, [r.storm_seconds for r in results])
    k_mem = fitted_exponent(nodes, [r.peak_mib for r in results])
    sizes = ", ".join(f"{r.nodes}/{r.pods}" for r in results)
    unfinished = [f"{r.nodes}/{r.pods}" for r in results if not r.completed]
    caveat = (f"; {', '.join(unfinished)} did not finish, so its time and the time exponent are lower bounds"
              if unfinished else "")
    return (f"growth over nodes/pods {sizes}: storm time ~ pods^{k_time:.2f}, "
            f"peak memory ~ nodes^{k_mem:.2f} (1.00 is linear){caveat}")


def plot(results: Sequence[StormResult], path: Path, title: str = "") -> Path:
    """Throughput (pods/s, with and without volumes) and peak memory against size."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    pods = [r.pods for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    left.plot(pods, [r.pods_per_second for r in results], "o-", label="with volumes")
    for r in results:
        if not r.completed:  # its rate is an upper bound: the storm was cut off
            left.plot([r.pods], [r.pods_per_second], "x", color="black", markersize=10)
            left.annotate("not finished", (r.pods, r.pods_per_second), textcoords="offset points", xytext=(-30, 8),
                          fontsize=8)
    bare = [(r.pods, r.bare_pods_per_second) for r in results if r.bare_pods_per_second]
    if bare:
        left.plot([p for p, _ in bare], [v for _, v in bare], "s--", label="without volumes")
    left.set_xlabel("pods in the storm")
    left.set_ylabel("pods per second (to Running)")
    left.set_ylim(bottom=0)
    left.legend()
    left.grid(alpha=0.3)
    right.plot([r.nodes for r in results], [r.peak_mib for r in results], "o-", color="tab:red")
    right.set_xlabel("nodes")
    right.set_ylabel("peak memory of cluster processes (MiB)")
    right.set_ylim(bottom=0)
    right.grid(alpha=0.3)
    fig.suptitle(textwrap.fill(title or growth_line(results), 120), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
