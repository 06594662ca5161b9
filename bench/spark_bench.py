"""``python -m bench spark``: the Spark engine beside the single-node cascade on the same hour.

Per hour size (default 20k and 200k documents, L1-L3), each in a fresh process: the single-node
cascade (``pipeline.run_partition``), then the Spark engine in local mode on 1 and on 2 cores.
Reports wall seconds, CPU seconds of the whole process tree (driver, JVM, Python workers) and
docs/s per core, with the load average beside them (the benchmark machine may be shared). The
Spark session's start is timed apart from the job. Results: ``bench/results/spark.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LAYERS = "url,exact,simhash,minhash"


def _tree_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and every live descendant, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        # utime, stime, and the waited-for children's cutime, cstime.
        cpu[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick
    total, frontier = 0.0, [pid]
    while frontier:
        p = frontier.pop()
        total += cpu.get(p, 0.0)
        frontier.extend(c for c, parent in parents.items() if parent == p)
    return total


def child(engine: str, docs: int, seed: int, cores: int) -> dict:
    from bench.harness import crawl, hour_ids
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths
    from dedup_tasks.registry.base import MemoryRegistry

    source = crawl(docs, 1, seed)
    batch = hour_ids(source)[0]
    root = Path(source).parent / f"spark-bench-{engine}-{cores}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "crawl").symlink_to(Path(source, "crawl").resolve())
    config = DedupConfig.load({"root": str(root), "layers": LAYERS})
    paths = BatchPaths(root, batch)
    out: dict = {"engine": engine, "docs": docs, "cores": cores}
    if engine == "local":
        from dedup_tasks.pipeline import run_partition

        cpu0, t0 = _tree_cpu_seconds(os.getpid()), time.perf_counter()
        summary = run_partition(paths, config, MemoryRegistry())
    else:
        from dedup_tasks.engines.spark import run_batches, spark_session

        t0 = time.perf_counter()
        spark = spark_session(
            f"local[{cores}]", "bench-spark", {"spark.driver.memory": "3g", "spark.executorEnv.NUMBA_NUM_THREADS": "1"}
        )
        out["session_start_s"] = time.perf_counter() - t0
        cpu0, t0 = _tree_cpu_seconds(os.getpid()), time.perf_counter()
        summary = run_batches(spark, [paths], config, MemoryRegistry(), partitions=max(2, 2 * cores))[0]
    wall = time.perf_counter() - t0
    cpu = _tree_cpu_seconds(os.getpid()) - cpu0
    shutil.rmtree(root, ignore_errors=True)
    return {
        **out,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "docs_per_s": round(docs / wall, 1),
        "docs_per_s_per_core": round(docs / wall / cores, 1),
        "docs_per_cpu_s": round(docs / cpu, 1) if cpu else None,
        "kept": summary.kept,
        "dropped_per_layer": {s.layer: s.dropped for s in summary.layers},
        "seconds_per_step": {s.layer: round(s.seconds, 2) for s in summary.layers},
        "spark_phases": summary.layers[0].extra if engine == "spark" else {},
    }


def main(argv: list[str] | None = None) -> int:
    from bench.harness import crawl, write_result

    parser = argparse.ArgumentParser(prog="python -m bench spark")
    parser.add_argument("--docs", type=int, nargs="+", default=[20_000, 200_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "DOCS", "CORES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        engine, docs, cores = args.child
        print(json.dumps(child(engine, int(docs), args.seed, int(cores))))
        return 0
    from bench.harness import RESULTS

    # Runs of other sizes from an earlier invocation are kept: a 200k run can be added later.
    previous = RESULTS / "spark.json"
    runs = json.loads(previous.read_text()).get("runs", []) if previous.exists() else []
    runs = [r for r in runs if r["docs"] not in args.docs]
    for docs in args.docs:
        crawl(docs, 1, args.seed)  # generated outside the measured processes
        for engine, cores in [*[("local", c) for c in args.cores], *[("spark", c) for c in args.cores]]:
            load_before = os.getloadavg()
            # N cores means N for everything: the local engine's numba threads, Spark's task slots
            # (each Python worker then runs its kernels on one thread), and the driver's kernels.
            env = {**os.environ, "NUMBA_NUM_THREADS": str(cores)}
            proc = subprocess.run(
                [sys.executable, "-m", "bench", "spark", "--seed", str(args.seed), "--child", engine, str(docs), str(cores)],
                check=True, capture_output=True, text=True, env=env,
            )  # fmt: skip
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run["load_avg_1m_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
            runs.append(run)
            print(
                f"{docs:>8} {engine:<6} {cores} core(s): {run['wall_s']:>8.1f} s wall {run['cpu_s']:>8.1f} s CPU "
                f"{run['docs_per_s_per_core']:>9,.0f} docs/s/core {run['docs_per_cpu_s'] or 0:>9,.0f} docs/CPU-s "
                f"load {run['load_avg_1m_before_after']}",
                flush=True,
            )
            # Partial results survive a long run being stopped.
            write_result("spark", {"runs": runs, "layers": LAYERS.split(","), "cpus": os.cpu_count()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
