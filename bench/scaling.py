"""Scenario 12: how the snapshot's paths and the wide table's change run scale (issue 46).

    python -m bench.scaling --out .cache/bench/scaling.json --record      # ~1 hour at 1M and 10M

One Spark session, one run, every figure best of ``--repeat``, each ratio taken within the run:

* the Change Data Feed fast path (scenario 2, :func:`bench.snapshots.change_data_feed`) at every table
  size of ``--sizes`` with the same ``--changed`` rows (10,000), and at the first size with the
  changed fractions of ``--fractions`` (0.1 %, 1 %, 10 %); each beside the full path on the same
  change and a plain Spark join of the same two versions: time against table size at a fixed change,
  and time against change size at a fixed table;
* scenario 1 (the full extract, :func:`bench.snapshots.full_extract`) and scenario 3 (the wide table's
  first run and its change run, :func:`bench.bench_widen.wide`) at every size.

The names issue 46 compares from run to run are in ``ratios``: ``s2.fast_path_vs_full_path`` (1M,
0.1 %), ``s2_10m.fast_path_vs_full_path`` (10M, 10,000 rows), ``s2.fast_10m_vs_fast_1m`` (the same
10,000 rows), ``s1.project_vs_spark_join`` and ``s1_10m.project_vs_spark_join``, ``s3.change_vs_first``
(1M). ``curves`` holds the points :mod:`bench.plot` draws. Seconds are wall time of the jobs in this
process (local[2]); shuffle partitions are sized per table as :func:`bench.harness.session` sizes them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from bench import bench_widen, data, snapshots
from bench.harness import LATEST, REPO, Goals, record, session

GOALS: Goals = {
    "s2.fast_path_vs_full_path": ("<= 0.5 of the full path (1M, 0.1% changed)", lambda r: r <= 0.5),
    "s2_10m.fast_path_vs_full_path": ("<= 0.2 of the full path (10M, 10,000 rows changed)", lambda r: r <= 0.2),
    "s2.fast_10m_vs_fast_1m": ("<= 1.5 (10x the table, the same 10,000 changed rows)", lambda r: r <= 1.5),
    "s1.project_vs_spark_join": ("<= 2x plain Spark (1M)", lambda r: r <= 2),
    "s1_10m.project_vs_spark_join": ("<= 1.5x plain Spark (10M)", lambda r: r <= 1.5),
    "s3.change_vs_first": ("<= 0.25 of the first run (1M)", lambda r: r <= 0.25),
}


def label(rows: int) -> str:
    """``1m``, ``10m``, ``100k``: a table size in the figures' names."""
    return f"{rows // 1_000_000}m" if rows % 1_000_000 == 0 else f"{rows // 1000}k"


def best(runs: list[dict], seconds: str) -> dict:
    """The repetition with the fewest ``seconds`` (its figures, ratios and checks together)."""
    return min(runs, key=lambda r: r["figures"][seconds])


def repeated(times: int, seconds: str, fn: Callable[..., dict], *args: Any, **kwargs: Any) -> dict:
    """``fn(*args, **kwargs)`` run ``times`` times; the best run, with every run's ``seconds`` and
    whether all were correct."""
    runs = [fn(*args, **kwargs) for _ in range(times)]
    chosen = dict(best(runs, seconds))
    chosen["runs_s"] = [r["figures"][seconds] for r in runs]
    chosen["correct"] = {k: all(r["correct"][k] for r in runs) for k in chosen["correct"]}
    return chosen


def dataset(con, work: Path, rows: int, seed: int) -> str:
    """The first version of the benchmark table at ``rows`` (made once, kept under ``work``)."""
    folder = work / f"n{rows}-s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    before = str(folder / "v1.parquet")
    if not os.path.exists(before):
        data.generate(con, rows, before, seed)
    return before


def sized(spark, rows: int) -> None:
    """Shuffle partitions for ``rows`` as :func:`bench.harness.session` sets them."""
    spark.conf.set("spark.sql.shuffle.partitions", str(max(4, rows // 125_000)))


def measure(spark, con, work: Path, sizes: list[int], changed: int, fractions: list[float], repeat: int,
            seed: int, wide_sizes: list[int], wide_repeat: int, save: Callable[[dict], None]) -> dict[str, Any]:
    """Every point of the curves, best of ``repeat`` each, then at each size the scenario-1 run and, at
    ``wide_sizes``, the scenario-3 run (best of ``wide_repeat``); ``save`` gets the points after each."""
    points: dict[str, Any] = {"s2": [], "s1": {}, "s3": {}}
    for rows in sizes:
        sized(spark, rows)
        before, folder = dataset(con, work, rows, seed), work / f"n{rows}-s{seed}"
        for count in sorted({changed, *([round(rows * f) for f in fractions] if rows == sizes[0] else [])}):
            result = repeated(repeat, "fast_path_s", snapshots.change_data_feed, spark, con, folder, rows, before,
                              seed, count, duckdb=False)
            points["s2"].append({"rows": rows, **result})
            print(f"s2 {rows:,} rows, {count:,} changed: {result['figures']}", flush=True)
            save(points)
    for rows in sizes:
        sized(spark, rows)
        before, folder = dataset(con, work, rows, seed), work / f"n{rows}-s{seed}"
        after = str(folder / "s1-after.parquet")
        expected = data.mutate(con, before, rows, after, data.Mutation(), seed)
        points["s1"][label(rows)] = repeated(repeat, "project_s", snapshots.full_extract, spark, con, folder, before,
                                             after, expected, duckdb=False)
        print(f"s1 {rows:,} rows: {points['s1'][label(rows)]['figures']}", flush=True)
        save(points)
        if rows in wide_sizes:
            points["s3"][label(rows)] = repeated(wide_repeat, "change_s", bench_widen.wide, spark, con, folder, rows)
            print(f"s3 {rows:,} rows: {points['s3'][label(rows)]['figures']}", flush=True)
            save(points)
    return points


def ratios(points: dict[str, Any], small: int, large: int, changed: int) -> dict[str, float]:
    """Issue 46's ratios from the measured points (``small``, ``large``: the 1M and 10M sizes)."""
    s2 = {(p["rows"], p["figures"]["changed_rows"]): p["figures"] for p in points["s2"]}
    out = {}
    low = s2.get((small, small // 1000))
    if low:
        out["s2.fast_path_vs_full_path"] = round(low["fast_path_s"] / low["full_path_s"], 2)
    high, same = s2.get((large, changed)), s2.get((small, changed))
    if high:
        out[f"s2_{label(large)}.fast_path_vs_full_path"] = round(high["fast_path_s"] / high["full_path_s"], 2)
        out[f"s2_{label(large)}.fast_path_vs_spark_join"] = round(high["fast_path_s"] / high["spark_join_s"], 2)
    if high and same:
        out[f"s2.fast_{label(large)}_vs_fast_{label(small)}"] = round(high["fast_path_s"] / same["fast_path_s"], 2)
    for size, result in points["s1"].items():
        prefix = "s1" if size == label(small) else f"s1_{size}"
        out[f"{prefix}.project_vs_spark_join"] = result["ratios"]["s1.project_vs_spark_join"]
    for size, result in points["s3"].items():
        prefix = "s3" if size == label(small) else f"s3_{size}"
        out[f"{prefix}.change_vs_first"] = result["ratios"]["s3.change_vs_first"]
    return out


def curves(points: dict[str, Any]) -> list[dict[str, Any]]:
    """The s2 points :mod:`bench.plot` draws: table size, changed rows, each path's seconds."""
    return [{"rows": p["rows"], "changed_rows": p["figures"]["changed_rows"],
             **{k: p["figures"][k] for k in ("fast_path_s", "full_path_s", "spark_join_s")}} for p in points["s2"]]


def scenario(points: dict[str, Any], args: argparse.Namespace, started: datetime) -> dict[str, Any]:
    """The scenario's result from the points measured so far."""
    correct = {f"s2@{p['rows']}/{p['figures']['changed_rows']}": all(p["correct"].values()) for p in points["s2"]}
    correct.update({f"{kind}@{size}": all(r["correct"].values()) for kind in ("s1", "s3")
                    for size, r in points[kind].items()})
    return {"figures": {"sizes": args.sizes, "changed_rows": args.changed, "fractions": args.fractions,
                        "repeat": args.repeat, "load_avg_at_start": [round(x, 1) for x in os.getloadavg()]},
            "ratios": ratios(points, min(args.sizes), max(args.sizes), args.changed),
            "curves": curves(points), "points": points, "correct": correct,
            "measured": f"{started.isoformat(timespec='minutes')} (python -m bench.scaling)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--changed", type=int, default=10_000)
    parser.add_argument("--fractions", default="0.001,0.01,0.1", type=lambda s: [float(x) for x in s.split(",")])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--wide-sizes", default=None, type=lambda s: [int(x) for x in s.split(",") if x],
                        help="scenario 3's sizes (default: --sizes; empty: none)")
    parser.add_argument("--wide-repeat", type=int, default=None, help="scenario 3's repetitions (default: --repeat)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", default=str(REPO / ".cache" / "bench"))
    parser.add_argument("--out", default=str(REPO / ".cache" / "bench" / "scaling.json"))
    parser.add_argument("--record", action="store_true", help="merge into bench/results/latest.json as scenario 12")
    args = parser.parse_args(argv)
    started = datetime.now(timezone.utc)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save(points: dict[str, Any]) -> None:  # an interrupted run keeps the points it finished
        out.write_text(json.dumps(scenario(points, args, started), indent=2, default=str))

    spark = session(max(args.sizes))
    try:
        points = measure(spark, data.connect(), Path(args.work), args.sizes, args.changed, args.fractions,
                         args.repeat, args.seed, args.sizes if args.wide_sizes is None else args.wide_sizes,
                         args.wide_repeat or args.repeat, save)
    finally:
        spark.stop()
    result = scenario(points, args, started)
    save(points)
    for name, value in result["ratios"].items():
        goal = GOALS.get(name)
        print(f"{name}: {value}" + (f" (goal {goal[0]}: {'met' if goal[1](value) else 'NOT met'})" if goal else ""))
    if args.record:
        record(result, "12", LATEST)
    return 0 if all(result["correct"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
