"""The scaling curves of scenario 12 (:mod:`bench.scaling`) as a figure, from ``bench/results/latest.json``:

    python -m bench.plot        # writes bench/results/scaling.svg (needs the ``bench`` extra: matplotlib)

Left: seconds against the table's size at a fixed number of changed rows; right: seconds against the
number of changed rows at the smallest table. Each panel has the three paths of one run: the snapshot
on the Change Data Feed fast path, the same change through the full path, and a plain Spark join of the
same two versions (each with the diff that follows, the join with its write). The SVG is written
without a date and with a fixed id salt, so the same figures draw the same file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.harness import LATEST, RESULTS

FIGURE = RESULTS / "scaling.svg"
SCENARIO = "12"
#: curve key -> legend label
PATHS = {"fast_path_s": "Change Data Feed fast path (snapshot + diff)",
         "full_path_s": "full path, same change (snapshot + diff)",
         "spark_join_s": "plain Spark join of the two versions"}
STYLE = {"fast_path_s": "o-", "full_path_s": "s--", "spark_join_s": "^:"}


def panels(points: list[dict[str, Any]], changed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(time against table size at ``changed`` rows, time against changed rows at the smallest table)."""
    smallest = min(p["rows"] for p in points)
    by_size = sorted((p for p in points if p["changed_rows"] == changed), key=lambda p: p["rows"])
    by_change = sorted((p for p in points if p["rows"] == smallest), key=lambda p: p["changed_rows"])
    return by_size, by_change


def draw(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "aretl-scaling"
    changed = result["figures"]["changed_rows"]
    by_size, by_change = panels(result["curves"], changed)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, points, x, title in (
            (left, by_size, "rows", f"{changed:,} changed rows, table size grows"),
            (right, by_change, "changed_rows", f"{by_change[0]['rows']:,}-row table, change grows")):
        for path, name in PATHS.items():
            axis.plot([p[x] for p in points], [p[path] for p in points], STYLE[path], label=name)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("rows in the table" if x == "rows" else "changed rows")
        axis.set_ylabel("seconds (local[2])")
        axis.set_title(title, fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8, loc="upper left")
    figure.suptitle(f"Scenario 12, {result.get('measured', '')}", fontsize=9)
    figure.tight_layout()
    figure.savefig(out, format="svg", metadata={"Date": None})
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latest", default=str(LATEST))
    parser.add_argument("--out", default=str(FIGURE))
    args = parser.parse_args(argv)
    result = json.loads(Path(args.latest).read_text())["runs"][0]["scenarios"][SCENARIO]
    draw(result, Path(args.out))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
