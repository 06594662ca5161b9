"""``python -m bench throughput``: whole processes as a user times them, ours beside the peers.

Each size is one input Parquet file, deduplicated by separate processes:

* ours: ``python -m dedup_tasks run --input FILE --out DIR --no-registry --layers url,exact,simhash,minhash
  --no-progress`` (start, imports, read, L1-L3 in-batch with the verifier, write);
* each peer (``bench.peers``, rensa and datasketch by default): ``python -m bench _peer_process``, which
  starts, reads the same Parquet file, deduplicates and writes its decisions as Parquet.

Sizes: ``20k`` (one generated hour), ``60k`` (three generated hours written as one input file, so
the cross-hour copies are in-batch duplicates) and ``200k`` (one generated hour of 200,000 documents).
Runs alternate (ours, then each peer, ``--runs`` times) so that a change in the machine's load hits
every system alike; the medians are reported. CPU seconds are user + sys of the process and
everything it waited for, read with ``getrusage(RUSAGE_CHILDREN)`` by a small launcher process, as is
the peak RSS: the launcher is a fresh interpreter, so the measured process does not inherit the
bench's own memory in ``ru_maxrss`` (Linux carries a forking process's resident set over ``exec``).
F1 is scored on the last run's decisions against the generator's truth (the decisions of every run
are the same: all systems here are deterministic).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import CASCADE_LAYERS, WORK, crawl, hour_ids, write_result

SIZES: dict[str, tuple[int, int]] = {"20k": (20_000, 1), "60k": (20_000, 3), "200k": (200_000, 1)}
DEFAULT_SIZES = ("20k", "60k", "200k")
DEFAULT_PEERS = ("rensa_lsh", "datasketch_lsh")
DEFAULT_RUNS = 5

# Runs the command given on its line, then prints its wall seconds and the rusage of everything it
# waited for. ``-I -S``: no site packages, nothing of the bench's path; a ~10 MiB interpreter.
_LAUNCHER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - started
if proc.returncode:
    sys.stderr.write(proc.stderr[-4000:])
    sys.exit(proc.returncode)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_seconds": wall, "user_seconds": r.ru_utime, "sys_seconds": r.ru_stime,
                  "cpu_seconds": r.ru_utime + r.ru_stime, "peak_rss_mib": r.ru_maxrss / 1024,
                  "minor_faults": r.ru_minflt, "major_faults": r.ru_majflt}))
"""


def measure(cmd: list[str]) -> dict[str, Any]:
    """Wall, CPU (user + sys), peak RSS and page faults of one whole process ``cmd`` (and its children)."""
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", _LAUNCHER, *cmd], capture_output=True, text=True, env=os.environ.copy())
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load_average_1m"] = os.getloadavg()[0]
    return result


def size_input(size: str, seed: int) -> tuple[Path, Path]:
    """The input Parquet file of ``size`` and its truth file (generated once, cached under bench/work)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dedup_tasks.io import BatchPaths

    docs, hours = SIZES[size]
    root = crawl(docs, hours, seed)
    ids = hour_ids(root)
    if hours == 1:
        return BatchPaths(root, ids[0]).input / "part-00000.parquet", root / "truth.parquet"
    target = root / f"one-input-{hours}h.parquet"
    if not target.exists():
        tables = [pq.read_table(BatchPaths(root, b).input / "part-00000.parquet") for b in ids]
        tmp = target.with_suffix(".tmp")
        pq.write_table(pa.concat_tables(tables), tmp)
        tmp.replace(target)
    return target, root / "truth.parquet"


def _ours_cmd(source: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "dedup_tasks", "run", "--input", str(source), "--out", str(out),
        "--no-registry", "--layers", ",".join(CASCADE_LAYERS), "--no-progress",
    ]  # fmt: skip


def _peer_cmd(name: str, source: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "bench", "_peer_process", name, str(source), str(out / f"{name}.parquet")]


def _decisions(system: str, out: Path):
    import pandas as pd

    if system == "crawl-dedup":
        return pd.read_parquet(out / "decisions")
    return pd.read_parquet(out / f"{system}.parquet")


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def cmd_throughput(
    sizes: list[str], seed: int = 0, runs: int = DEFAULT_RUNS, peers: list[str] | tuple[str, ...] = DEFAULT_PEERS, out: str = "throughput"
) -> dict:
    """Time every size's whole processes (ours and ``peers``, alternating), write and print the table."""
    import pandas as pd

    from bench.peers import available_peers
    from bench.score import score
    from dedup_tasks.warmup import compile_bytecode

    compile_bytecode()  # as `make install` leaves it: every process loads bytecode
    ready = set(available_peers())
    skipped = {p: "not installed (pip install -r requirements-bench.txt)" for p in peers if p not in ready}
    systems = ["crawl-dedup", *[p for p in peers if p in ready]]
    load_start = os.getloadavg()
    results: dict[str, Any] = {}
    warmed = False
    for size in sizes:
        source, truth_path = size_input(size, seed)
        outs = {s: WORK / f"throughput-{size}-{s}" for s in systems}

        def cmd(system: str, source: Path = source, outs: dict = outs) -> list[str]:
            shutil.rmtree(outs[system], ignore_errors=True)
            outs[system].mkdir(parents=True)
            return _ours_cmd(source, outs[system]) if system == "crawl-dedup" else _peer_cmd(system, source, outs[system])

        if not warmed:  # numba's cache, bytecode and the page cache filled once, untimed
            for system in systems:
                measure(cmd(system))
            warmed = True
        per_system: dict[str, list[dict]] = {s: [] for s in systems}
        for _ in range(runs):
            for system in systems:
                per_system[system].append(measure(cmd(system)))
        truth = pd.read_parquet(truth_path)
        entry: dict[str, Any] = {"input": source.name, "docs": len(truth), "systems": {}}
        for system in systems:
            quality = score(_decisions(system, outs[system]), truth)
            r = per_system[system]
            entry["systems"][system] = {
                "runs": r,
                "median_wall_seconds": _median(r, "wall_seconds"),
                "median_cpu_seconds": _median(r, "cpu_seconds"),
                "median_user_seconds": _median(r, "user_seconds"),
                "median_sys_seconds": _median(r, "sys_seconds"),
                "median_peak_rss_mib": _median(r, "peak_rss_mib"),
                "max_peak_rss_mib": max(x["peak_rss_mib"] for x in r),
                "f1": quality["f1"], "precision": quality["precision"], "recall": quality["recall"],
            }  # fmt: skip
            shutil.rmtree(outs[system], ignore_errors=True)
        ours = entry["systems"]["crawl-dedup"]
        for system in systems[1:]:
            s = entry["systems"][system]
            s["cpu_ratio_peer_over_ours"] = s["median_cpu_seconds"] / ours["median_cpu_seconds"]
            s["wall_ratio_peer_over_ours"] = s["median_wall_seconds"] / ours["median_wall_seconds"]
        results[size] = entry
    table = format_table(results, runs)
    command = "python -m bench throughput" + ("" if list(sizes) == list(DEFAULT_SIZES) else f" --sizes {','.join(sizes)}")
    command += "" if runs == DEFAULT_RUNS else f" --runs {runs}"
    command += "" if list(peers) == list(DEFAULT_PEERS) else f" --peers {','.join(peers) or 'none'}"
    command += "" if out == "throughput" else f" --out {out}"
    footer = (
        f"Command: `{command}`; median of {runs} alternating whole-process runs per system; "
        f"load average (1 min) {load_start[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end on {len(os.sched_getaffinity(0))} CPUs."
    )
    print(table)
    print(footer)
    data = {
        "command": command, "runs": runs, "seed": seed, "layers": list(CASCADE_LAYERS), "ours_command": " ".join(
            ["python -m dedup_tasks run --input FILE --out DIR --no-registry --layers", ",".join(CASCADE_LAYERS), "--no-progress"]),
        "sizes": results, "skipped": skipped, "table": table, "footer": footer,
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
    }  # fmt: skip
    write_result(out, data)
    return data


def format_table(results: dict[str, Any], runs: int) -> str:
    """The markdown table README and docs/performance.md quote."""
    lines = [
        "| docs | system | wall s | CPU s (user + sys) | peak RSS MiB | F1 | peer CPU / ours |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for entry in results.values():
        for system, s in entry["systems"].items():
            ratio = f"{s['cpu_ratio_peer_over_ours']:.2f}x" if "cpu_ratio_peer_over_ours" in s else ""
            name = f"**{system}**" if system == "crawl-dedup" else system
            lines.append(
                f"| {entry['docs']:,} | {name} | {s['median_wall_seconds']:.2f} | {s['median_cpu_seconds']:.2f} "
                f"({s['median_user_seconds']:.2f} + {s['median_sys_seconds']:.2f}) | {s['median_peak_rss_mib']:,.0f} | "
                f"{s['f1']:.4f} | {ratio} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(DEFAULT_SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="whole-process runs per system and size (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peers", default=",".join(DEFAULT_PEERS), help="peers timed beside ours ('none': ours only)")
    parser.add_argument("--out", default="throughput", help="result name under bench/results")
    args = parser.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; known: {', '.join(SIZES)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    cmd_throughput(sizes, args.seed, args.runs, [p for p in args.peers.split(",") if p and p != "none"], args.out)
    return 0
