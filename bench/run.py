"""The benchmark harness: ``python -m bench.run --rows 1000000`` (or ``make bench``).

Each scenario times the project's path and a reference in the same run on the same data, prints a
table of figures and ratios and writes everything to ``bench/results/latest.json``. Every scenario is
repeated ``--repeat`` times (fresh warehouse each time) and every repetition is reported: on a shared
machine the ratios, not the seconds, are what count.

Scenarios: 1 snapshot + diff of a full extract and 2 the Change Data Feed fast path (``bench.snapshots``);
3 wide table and 4 sinks (``bench.bench_widen`` / ``bench.bench_sinks``); 5 orchestration overhead
(Airflow + spark-submit, in a child process); 6 driver peak memory at N and N/10 on a real standalone
cluster (``--master`` runs the in-process scenarios on any master); 7 latency of the 1k-row DAG in both
execution modes (spark-submit and Spark Connect) and warm per-job times (``bench.latency``); 8 live-sync
latency, commit to destination under a real ``airflow standalone`` (``bench.live``, ~7 minutes); 9 a
fleet of ``--fleet-n`` pipelines on one Airflow (``bench.fleet``); 10 a long-lived Spark Connect server
over 201 jobs (``bench.connect_leak``); 11 throughput of a SaaS destination against its documented rate
limit, whole job (``bench.rate_limit``, ~1 minute); 12 how scenarios 1-3 scale with the table and the change, at 1M
and 10M rows (``bench.scaling``, ~1 hour). Scenarios 5 and 7-12 run alone in a child process (they start
their own Airflow, servers or session); each can also be run by itself with its module's ``--record``.

A scenario that raises is recorded as failed (``{"error": ...}`` in the results, its traceback on
stderr, a FAILED line in the table), the others still run, and the exit status is 1. Skips are only
for prerequisites that are genuinely missing: a sink whose service cannot start (``<sink>_skipped``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path

from bench import (
    bench_sinks, bench_widen, connect_leak, data, fleet, latency, live, orchestration, rate_limit, scaling, snapshots,
)
from bench.data import Mutation
from bench.harness import REPO, RESULTS, Goals, session, submit_noop_s, with_reference

GOALS: Goals = {  # ratio or figure name -> (goal text, predicate); each scenario module owns its goals
    "s1.project_vs_duckdb": ("<= 3x DuckDB (goal at 10M)", lambda r: r <= 3),
    "s2.fast_path_vs_duckdb": ("< 1 (faster than the DuckDB full diff)", lambda r: r < 1),
    "s6.driver_rss_growth": ("flat (<= 1.5x for 10x the rows)", lambda r: r <= 1.5),
    **bench_widen.GOALS, **bench_sinks.GOALS, **orchestration.GOALS, **latency.GOALS, **live.GOALS,
    **fleet.GOALS, **connect_leak.GOALS, **rate_limit.GOALS, **scaling.GOALS,
}


def peak_rss(spark) -> dict:
    """Peak resident memory (MiB, VmHWM) of the driver JVM and of this Python process so far.
    (VmHWM, not getrusage: a child's ru_maxrss starts from its parent's peak at fork.)"""

    def hwm(pid: int | str) -> int:
        with open(f"/proc/{pid}/status") as handle:
            return round(next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:")) / 1024)

    return {"jvm_peak_rss_mib": hwm(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()),
            "python_peak_rss_mib": hwm("self")}


CLUSTER = REPO / "scripts" / "services" / "spark_cluster.sh"


def scenario_6(args) -> dict:
    """Driver peak RSS running scenario 1 at N and at N/10, each in a fresh process, on the real
    standalone cluster of ``scripts/services/spark_cluster.sh``: in local mode the executor lives in
    the driver's JVM, so its peak would be the executor's working memory, not what the driver holds.
    Flat means the driver collects nothing proportional to the data."""
    small = max(1000, args.rows // 10)
    running = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, text=True).returncode == 0
    started = subprocess.run(["bash", str(CLUSTER), "start"], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHON": sys.executable})
    master = started.stdout.strip()
    try:
        rss = {}
        for rows in (small, args.rows):
            out = REPO / ".cache" / "bench" / f"rss-{rows}.json"
            subprocess.run([sys.executable, "-m", "bench.run", "--rows", str(rows), "--seed", str(args.seed),
                            "--repeat", "1", "--scenarios", "1", "--master", master, "--out", str(out),
                            "--baseline", str(out) + ".none", "--quiet"], check=True, cwd=REPO)
            rss[rows] = json.loads(out.read_text())["runs"][0]["rss"]
    finally:
        if not running:
            subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True)
    figures = {"master": master}
    for rows in (small, args.rows):
        figures[f"driver_jvm_peak_rss_mib@{rows}"] = rss[rows]["jvm_peak_rss_mib"]
        figures[f"driver_python_peak_rss_mib@{rows}"] = rss[rows]["python_peak_rss_mib"]
    return {"figures": figures,
            # the Python figures include the child's DuckDB work (the data mutation), so only the JVM is judged
            "ratios": {"s6.driver_rss_growth": round(rss[args.rows]["jvm_peak_rss_mib"]
                                                     / rss[small]["jvm_peak_rss_mib"], 2)}}


def alone_scenario(module: str, name: str, *args: str) -> dict:
    """A scenario that runs in a process of its own (``python -m bench.<module> --out FILE``): it
    starts its own Airflow, servers or cluster, which must not share this process's Spark session."""
    out = REPO / ".cache" / "bench" / f"{name}.json"
    subprocess.run([sys.executable, "-m", f"bench.{module}", "--out", str(out), *args], check=True, cwd=REPO)
    result: dict = json.loads(out.read_text())
    return with_reference(result)


#: scenario -> (module run alone, output name); scenario 6 runs this harness itself on a cluster
ALONE = {"5": ("orchestration", "orchestration"), "7": ("latency", "latency"), "8": ("live", "live"),
         "9": ("fleet", "fleet"), "10": ("connect_leak", "connect_leak"), "11": ("rate_limit", "rate_limit"),
         "12": ("scaling", "scaling")}


def attempt(results: dict, scenario: str, fn, *args) -> None:
    """Run one scenario into ``results[scenario]``; if it raises, record it as failed (the error in
    the results, the traceback on stderr) and go on: one broken scenario must neither vanish from the
    table nor cost the figures of the others."""
    try:
        results[scenario] = fn(*args)
    except Exception as exc:  # any failure is the scenario's, reported as such
        traceback.print_exc()
        results[scenario] = {"error": f"{type(exc).__name__}: {exc}"}


def failures(report: dict) -> list[tuple[int, str, str]]:
    """(repetition, scenario, error) of every failed scenario."""
    return [(i + 1, s, result["error"]) for i, run in enumerate(report["runs"])
            for s, result in sorted(run["scenarios"].items()) if "error" in result]


def one_run(args, spark, con, work: Path, before: str, after: str, expected: dict) -> dict:
    run: dict = {"scenarios": {}}
    wanted = set(args.scenarios)
    noop_s = submit_noop_s()  # the reference of every wall time of this repetition
    if "1" in wanted:
        attempt(run["scenarios"], "1", snapshots.full_extract, spark, con, work, before, after, expected)
    if "2" in wanted:
        attempt(run["scenarios"], "2", snapshots.change_data_feed, spark, con, work, args.rows, before, args.seed)
    if "3" in wanted:
        attempt(run["scenarios"], "3", bench_widen.wide, spark, con, work, args.rows)
    if "4" in wanted:
        attempt(run["scenarios"], "4", bench_sinks.sinks, spark, con, work, args.rows)
    run["rss"] = peak_rss(spark)
    for result in run["scenarios"].values():
        with_reference(result, noop_s)
    return run


def machine() -> dict:
    import psutil

    return {"host": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30),
            "load_avg_at_start": [round(x, 1) for x in os.getloadavg()]}


def table(report: dict) -> str:
    """Every figure and ratio, one column per repetition, goals judged on the median-free worst case."""
    runs = report["runs"]
    lines = [(f"N = {report['rows']:,} rows, seed {report['seed']}, {report['date']}, "
              f"{report['machine']['cores']} cores, load {report['machine']['load_avg_at_start']}")]
    header = ["scenario", "figure"] + [f"run {i + 1}" for i in range(len(runs))] + ["goal", "met"]
    rows = []
    scenarios = sorted({s for r in runs for s in r["scenarios"]})
    for s in scenarios:
        names = list(dict.fromkeys(n for r in runs for kind in ("figures", "ratios")
                                   for n in r["scenarios"].get(s, {}).get(kind, {})))
        for name in names:
            values = [r["scenarios"].get(s, {}).get("figures", {}).get(name,
                      r["scenarios"].get(s, {}).get("ratios", {}).get(name)) for r in runs]
            goal, met = GOALS.get(name, ("", None))
            verdict = "" if met is None else ("yes" if all(v is not None and met(v) for v in values) else "no")
            rows.append([s, name, *[str(v) for v in values], goal, verdict])
        for r_i, r in enumerate(runs):
            bad = [k for k, ok in r["scenarios"].get(s, {}).get("correct", {}).items() if not ok]
            if bad:
                rows.append([s, f"WRONG RESULT in run {r_i + 1}", ", ".join(bad), "", ""])
    for repetition, s, error in failures(report):
        rows.append([s, f"FAILED in run {repetition}", error, "", ""])
    for key in ("jvm_peak_rss_mib", "python_peak_rss_mib"):  # of this process's local session, if it ran one
        if any(r["rss"][key] is not None for r in runs):
            rows.append(["-", key, *[str(r["rss"][key]) for r in runs], "", ""])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *[r + [""] * (len(header) - len(r)) for r in rows])]
    fmt = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    lines += [fmt(header), fmt(["-" * w for w in widths])]
    lines += [fmt(r + [""] * (len(header) - len(r))) for r in rows]
    return "\n".join(lines)


# Ratios where a larger number is better (rates, shares of a reference's rate: the ones whose goal is a
# floor); all others are "times the reference" or overheads, where smaller is better.
HIGHER_IS_BETTER: set[str] = {name for name, (goal, _) in GOALS.items() if goal.startswith(">=")}
REGRESSION = 1.25  # a ratio more than 25% worse than the baseline's is called out


def regressions(report: dict, baseline: dict | None) -> list[dict]:
    """Ratios more than 25% worse than in ``baseline`` (the previous table at the same N). Each side
    is judged by its best repetition, so one noisy repetition on a shared machine does not count as a
    regression; improvements of the same size are listed too, marked as such."""
    if not baseline or baseline.get("rows") != report["rows"]:
        return []

    def best(rep: dict) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        for run in rep.get("runs", []):
            for scenario in run.get("scenarios", {}).values():
                for name, value in (scenario.get("ratios") or {}).items():
                    if isinstance(value, (int, float)):
                        values.setdefault(name, []).append(value)
        return {n: (max(v) if n in HIGHER_IS_BETTER else min(v)) for n, v in values.items()}

    old, new = best(baseline), best(report)
    changes = []
    for name in sorted(old.keys() & new.keys()):
        if not old[name] or not new[name]:
            continue
        worse = old[name] / new[name] if name in HIGHER_IS_BETTER else new[name] / old[name]
        if worse > REGRESSION or worse < 1 / REGRESSION:
            changes.append({"ratio": name, "baseline": old[name], "now": new[name],
                            "kind": "regression" if worse > 1 else "improvement",
                            "change_pct": round((new[name] / old[name] - 1) * 100)})
    return changes


def describe_changes(report: dict) -> str:
    base = report.get("baseline") or {}
    if not base.get("date"):
        return "No baseline table at this N: no regression check."
    lines = [(f"Against the baseline of {base['date']} (N = {report['rows']:,}, {base['path']}), best repetition "
              f"each side; more than {round((REGRESSION - 1) * 100)}% apart:")]
    for c in report["changes"]:
        marker = "REGRESSION" if c["kind"] == "regression" else "improvement"
        lines.append(f"  {marker}: {c['ratio']} {c['baseline']} -> {c['now']} ({c['change_pct']:+d}%)")
    if not report["changes"]:
        lines.append("  none")
    return "\n".join(lines)


def write(out: str, report: dict) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(report, indent=2, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--scenarios", default="1,2,3,4,5,6,7,8,9,10,11,12", type=lambda s: s.split(","))
    parser.add_argument("--fleet-n", type=int, default=20, help="pipelines of scenario 9 (default 20)")
    parser.add_argument("--update", type=float, default=0.01)
    parser.add_argument("--insert", type=float, default=0.005)
    parser.add_argument("--delete", type=float, default=0.005)
    parser.add_argument("--work", default=str(REPO / ".cache" / "bench"))
    parser.add_argument("--out", default=str(RESULTS / "latest.json"))
    parser.add_argument("--quiet", action="store_true", help="no table on stdout (child runs)")
    parser.add_argument("--master", default="local[2]", help="Spark master of the in-process scenarios")
    parser.add_argument("--baseline", default=str(RESULTS / "latest.json"),
                        help="the previous table to check ratios against (default: the one --out replaces)")
    args = parser.parse_args(argv)
    baseline_path = Path(args.baseline)
    baseline = json.loads(baseline_path.read_text()) if baseline_path.exists() else None

    work = Path(args.work) / f"n{args.rows}-s{args.seed}"
    work.mkdir(parents=True, exist_ok=True)
    con = data.connect()
    before, after = str(work / "v1.parquet"), str(work / "v2.parquet")
    mutation = Mutation(args.update, args.insert, args.delete)
    if not os.path.exists(before):
        data.generate(con, args.rows, before, args.seed)
    expected = data.mutate(con, before, args.rows, after, mutation, args.seed)

    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rows": args.rows,
              "seed": args.seed, "mutation": vars(mutation), "machine": machine(), "runs": []}
    in_process = [s for s in args.scenarios if s in ("1", "2", "3", "4")]
    if in_process:
        spark = session(args.rows, args.master)
        try:
            for _ in range(args.repeat):
                report["runs"].append(one_run(args, spark, con, work, before, after, expected))
                write(args.out, report)  # an interrupted run keeps its finished repetitions
        finally:
            spark.stop()
    alone = [s for s in args.scenarios if s in ALONE or s == "6"]
    if alone:
        if not report["runs"]:
            report["runs"].append({"scenarios": {}, "rss": {"jvm_peak_rss_mib": None, "python_peak_rss_mib": None}})
        extra: dict = {}
        for scenario in alone:
            if scenario == "6":
                attempt(extra, "6", scenario_6, args)
                continue
            module, name = ALONE[scenario]
            options = ["--n", str(args.fleet_n)] if scenario == "9" else []
            attempt(extra, scenario, alone_scenario, module, name, *options)
        for run in report["runs"]:  # measured once, shown against every repetition
            run["scenarios"].update(extra)

    report["failed"] = [{"run": r, "scenario": s, "error": e} for r, s, e in failures(report)]
    report["baseline"] = {"path": str(baseline_path), "date": (baseline or {}).get("date")}
    report["changes"] = regressions(report, baseline)
    if baseline and Path(args.out).resolve() == baseline_path.resolve():  # the replaced table stays readable
        write(str(RESULTS / "previous.json"), baseline)
    write(args.out, report)
    if not args.quiet:
        print(table(report))
        print("\n" + describe_changes(report))
        print(f"\nwritten to {args.out}")
    for failure in report["failed"]:
        print(f"FAILED: scenario {failure['scenario']} (run {failure['run']}): {failure['error']}", file=sys.stderr)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
