"""The growth line and plot of storms at several sizes: the exponent, and an honest
caveat when the largest storm was cut off (its time is then only a lower bound)."""

from __future__ import annotations

from pathlib import Path

from pvchaos.kit.growth import growth_line, plot
from pvchaos.kit.storm import StormResult


def result(nodes: int, pods: int, seconds: float, mib: float, completed: bool = True) -> StormResult:
    return StormResult(shape=f"{nodes}x{pods}", nodes=nodes, zones=3, pods=pods, claims=pods,
                       storm_seconds=seconds, bare_seconds=pods / 100, peak_mib=mib, completed=completed)


def test_linear_growth_reads_as_exponent_one() -> None:
    line = growth_line([result(100, 500, 10, 1000), result(300, 1500, 30, 3000)])
    assert "storm time ~ pods^1.00" in line and "peak memory ~ nodes^1.00" in line
    assert "lower bound" not in line


def test_a_storm_cut_off_makes_the_time_exponent_a_lower_bound(tmp_path: Path) -> None:
    runs = [result(100, 500, 20, 1000), result(1000, 2000, 600, 1900, completed=False)]
    line = growth_line(runs)
    assert "1000/2000 did not finish" in line and "lower bounds" in line
    png = plot(runs, tmp_path / "g.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
