"""The harness every benchmark shares, and the quality and throughput commands of ``python -m bench``.

Every command writes ``bench/results/<name>.json`` and prints a table. Sizes:

* small: one hour of 20,000 docs for quality (ours and every peer on the same documents, in the same
  order, in this process) and throughput at 20,000 docs/hour;
* medium: two hours of 20,000 docs (cross-hour duplicates through the registry), throughput up to 60,000;
* large: as medium, plus throughput and peak memory at 200,000 docs/hour (ours only).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
WORK = BENCH_DIR / "work"
SIZES = {
    "tiny": {"docs": 2_000, "hours": 2, "throughput_docs": [2_000]},
    "small": {"docs": 20_000, "hours": 1, "throughput_docs": [20_000]},
    "medium": {"docs": 20_000, "hours": 2, "throughput_docs": [20_000, 60_000]},
    "large": {"docs": 20_000, "hours": 2, "throughput_docs": [20_000, 200_000]},
    # Three hours through the registry (issue #17's registry run; docs/near-copies.md).
    "hours3": {"docs": 20_000, "hours": 3, "throughput_docs": [20_000]},
}
CASCADE_LAYERS = ("url", "exact", "simhash", "minhash")


def write_result(name: str, data: dict, directory: Path | None = None) -> Path:
    """``<directory>/<name>.json`` (default ``bench/results``) with the machine it ran on, atomically."""
    directory = RESULTS if directory is None else directory
    directory.mkdir(parents=True, exist_ok=True)
    data = {
        "name": name,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": _cpus(), "python": platform.python_version(), "platform": platform.platform(), **cpu_kind()},
        **data,
    }
    path = directory / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=float))
    tmp.replace(path)
    return path


# The instructions the transformer's matmuls run on: the same code embeds about 2.5x as fast with AMX
# as with AVX-512 bf16 alone (docs/semantic.md), so seconds compare only within a kind.
MATMUL_FLAGS = ("amx_bf16", "avx512_bf16", "avx512_vnni", "avx2")


def cpu_kind(cpuinfo: str | Path = "/proc/cpuinfo") -> dict[str, Any]:
    """The CPU's model name and which of ``MATMUL_FLAGS`` it has (empty where cpuinfo is unreadable)."""
    from dedup_tasks.embed.e5_torch import read_cpuinfo

    info = read_cpuinfo(cpuinfo)
    if info is None:
        return {}
    return {"cpu_model": info.model, "matmul_flags": [f for f in MATMUL_FLAGS if f in info.flags]}


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def crawl(docs: int, hours: int, seed: int = 0, source: str = "eval", edits: str = "crawl") -> Path:
    """A generated crawl, cached under bench/work by its parameters.

    Benchmarks use the eval corpora (published numbers come from them) and refuse with
    bench.evaldata's message when they are absent, instead of silently measuring the sample corpus.
    ``source="sample"`` asks for the shipped sample corpus on purpose: other texts (speeches, classical
    Chinese) than the news the thresholds were read on, a check that the bench is not too easy.
    """
    from bench.generate import GENERATOR_VERSION, HARSH_EDITS, generate_crawl

    suffix = ("" if source == "eval" else f"-{source}") + ("" if edits == "crawl" else f"-{edits}")
    root = WORK / f"crawl-{docs}x{hours}-seed{seed}-g{GENERATOR_VERSION}{suffix}"
    if not (root / "truth.parquet").exists():
        mix = HARSH_EDITS if edits == "harsh" else None
        generate_crawl(root, docs, hours=hours, seed=seed, source=source, mix=mix)
    return root


def hour_ids(root: Path) -> list[str]:
    parts = sorted((root / "crawl").glob("dt=*/hour=*"))
    return [f"{p.parent.name[3:]}T{p.name[5:]}" for p in parts]


def read_hours(root: Path) -> pd.DataFrame:
    frames = []
    for batch_id in hour_ids(root):
        from dedup_tasks.io import BatchPaths

        frame = pq.read_table(BatchPaths(root, batch_id).input).to_pandas()
        frame["_batch"] = batch_id
        frames.append(frame.sort_values(["fetched_at", "doc_id"], kind="stable"))
    return pd.concat(frames, ignore_index=True)


# ---- quality: ours and peers on the same documents ------------------------------------------------


# L3's registry counters summed over the hours (the text reads of registered candidates, schema 9).
REGISTRY_TEXT_STATS = ("registry_verified_on_text", "registry_text_missing", "registry_bbit_unverified", "partitions_read", "text_read_seconds")


def run_ours(
    root: Path, layers=CASCADE_LAYERS, overrides: dict | None = None, compact_between: bool = False
) -> tuple[pd.DataFrame, dict]:
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths, read_input
    from dedup_tasks.pipeline import publish, run_batch
    from dedup_tasks.registry.base import MemoryRegistry

    # Each hour is published as a run would, so L3 reads registered documents' text back from there.
    out = WORK / f"quality-out-{root.name}"
    shutil.rmtree(out, ignore_errors=True)
    config = DedupConfig(layers=tuple(layers), root=str(out), **(overrides or {}))
    registry = MemoryRegistry()
    decisions, per_layer, seconds, rows = [], {}, 0.0, 0
    text_stats = dict.fromkeys(REGISTRY_TEXT_STATS, 0)
    for batch_id in hour_ids(root):
        table, _ = read_input(BatchPaths(root, batch_id).input)
        if compact_between:
            registry.compact()  # earlier hours in the main tier: the rule for documents older than a compaction
        result = run_batch(table, batch_id, config, registry)
        publish(BatchPaths(out, batch_id), result)
        decisions.append(result.decisions.to_pandas())
        seconds += sum(s.seconds for s in result.summary.layers)
        rows += result.summary.rows_in
        for s in result.summary.layers:
            agg = per_layer.setdefault(s.layer, {"rows_in": 0, "dropped": 0, "seconds": 0.0})
            agg["rows_in"] += s.rows_in
            agg["dropped"] += s.dropped
            agg["seconds"] += s.seconds
            if s.layer == "minhash":
                for key in REGISTRY_TEXT_STATS:
                    text_stats[key] += s.extra.get(key, 0)
    timing = {"seconds": seconds, "docs_per_s": rows / seconds, "layers": per_layer, "minhash_registry_text": text_stats}
    return pd.concat(decisions, ignore_index=True), timing


def cmd_quality(
    size: str, seed: int, peers: list[str] | None, source: str = "eval", overrides: dict | None = None, out: str | None = None,
    edits: str = "crawl", compact_between: bool = False,
) -> dict:
    from bench.peers import CONCURRENT_PEERS, available_peers, run_peers
    from bench.score import format_edit_band_table, format_near_table, format_table, score

    spec = SIZES[size]
    root = crawl(spec["docs"], spec["hours"], seed, source, edits)
    truth = pd.read_parquet(root / "truth.parquet")
    _warm_up()
    results, speed = {}, {}
    decisions, timing = run_ours(root, overrides=overrides, compact_between=compact_between)
    results["crawl-dedup"] = score(decisions, truth)
    speed["crawl-dedup"] = timing
    docs = read_hours(root)
    names = peers if peers is not None else available_peers()
    for name, (peer_decisions, elapsed) in run_peers(names, docs.drop(columns=["_batch"])).items():
        results[name] = score(peer_decisions, truth)
        speed[name] = {"seconds": elapsed, "docs_per_s": len(docs) / elapsed, "concurrent": name in CONCURRENT_PEERS}
    for name, s in results.items():
        s["docs_per_s"] = speed[name]["docs_per_s"]
        s["speedup_ours_over_peer"] = speed["crawl-dedup"]["docs_per_s"] / speed[name]["docs_per_s"]
    table = format_table(results)
    print(table)
    print(format_near_table(results["crawl-dedup"]))
    print(format_edit_band_table(results["crawl-dedup"]))
    print("docs/s: " + ", ".join(f"{k} {v['docs_per_s']:,.0f}" for k, v in speed.items()))
    print("L3 registry text reads: " + ", ".join(f"{k} {v}" for k, v in timing["minhash_registry_text"].items()))
    if overrides:
        print(f"config overrides: {overrides}")
    data = {"size": size, "seed": seed, "source": source, "edits": edits, "overrides": overrides or {}, "docs": len(docs), "hours": spec["hours"],
            "results": results, "speed": speed, "table": table, "edit_band_table": format_edit_band_table(results["crawl-dedup"])}
    write_result(out or (f"quality-{size}" + ("" if source == "eval" else f"-{source}") + ("" if edits == "crawl" else f"-{edits}")), data)
    return data


def _warm_up() -> None:
    """Compile the numba kernels once so the first measured batch does not pay for it."""
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.pipeline import run_batch
    from dedup_tasks.registry.base import MemoryRegistry

    root = crawl(300, 1, seed=99)
    from dedup_tasks.io import BatchPaths, read_input

    table, _ = read_input(BatchPaths(root, hour_ids(root)[0]).input)
    run_batch(table, "warmup", DedupConfig(layers=CASCADE_LAYERS), MemoryRegistry(plain_band_keys=True))


# ---- throughput and memory, each size in a fresh process ----------------------------------------------


THROUGHPUT_REPEATS = 3


def peak_rss_mib() -> float:
    """This process image's peak resident set (VmHWM, see ``procstat.status_mib``)."""
    from bench.procstat import status_mib

    return status_mib("VmHWM")


def throughput_child(docs: int, seed: int, repeats: int = THROUGHPUT_REPEATS) -> dict:
    """Run in a subprocess: time one hour of ``docs`` documents end to end and report peak RSS.

    The hour runs ``repeats`` times in the same process, each against an empty registry: the first
    run is what a fresh task process gets (its memory touched for the first time), the best of the
    others is the steady state of a long-running worker. This VM's timings vary by +-20% from run to
    run, so both are reported, with every run's number.
    """
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths, read_input
    from dedup_tasks.pipeline import publish, run_batch
    from dedup_tasks.registry.base import MemoryRegistry

    root = crawl(docs, 1, seed)
    batch_id = hour_ids(root)[0]
    _warm_up()
    rss_before = peak_rss_mib()
    runs = []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        tables = [read_input(BatchPaths(root, batch_id).input)[0]]
        read_s = time.perf_counter() - started
        # The registry --no-registry opens (the whole-process figure's command): a fresh registry under
        # the default stoplist would learn one from this hour in every run, a once-per-registry cost.
        registry = MemoryRegistry(plain_band_keys=True)
        result = run_batch(tables.pop(), batch_id, DedupConfig(layers=CASCADE_LAYERS), registry)
        out = WORK / f"out-{docs}"
        t0 = time.perf_counter()
        publish(BatchPaths(out, batch_id), result)
        write_s = time.perf_counter() - t0
        total = time.perf_counter() - started
        cascade = sum(s.seconds for s in result.summary.layers)
        runs.append(
            {
                "cascade_seconds": cascade,
                "end_to_end_seconds": total,
                "read_seconds": read_s,
                "write_seconds": write_s,
                "layers": {s.layer: {"rows_in": s.rows_in, "dropped": s.dropped, "seconds": s.seconds, "docs_per_s": s.rows_in / s.seconds if s.seconds else None} for s in result.summary.layers},
            }
        )
        del result
    first = runs[0]
    steady = min(runs[1:], key=lambda r: r["cascade_seconds"]) if len(runs) > 1 else first
    return {
        "docs": docs,
        "repeats": len(runs),
        "cascade_seconds": first["cascade_seconds"],
        "cascade_docs_per_s": docs / first["cascade_seconds"],
        "steady_cascade_seconds": steady["cascade_seconds"],
        "steady_cascade_docs_per_s": docs / steady["cascade_seconds"],
        "cascade_docs_per_s_each_run": [docs / r["cascade_seconds"] for r in runs],
        "end_to_end_seconds": first["end_to_end_seconds"],
        "end_to_end_docs_per_s": docs / first["end_to_end_seconds"],
        "read_seconds": first["read_seconds"],
        "write_seconds": first["write_seconds"],
        "layers": first["layers"],
        "steady_layers": steady["layers"],
        "peak_rss_mib": peak_rss_mib(),
        "rss_before_batch_mib": rss_before,
    }


# ---- whole processes: what a user times ----------------------------------------------------------

WHOLE_PROCESS_PEERS = ("rensa_lsh", "datasketch_lsh")


def _child_seconds(cmd: list[str]) -> dict:
    """Wall and CPU seconds (user + sys, its threads and children included) of one process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, sys_ = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"wall_seconds": wall, "cpu_seconds": user + sys_, "user_seconds": user, "sys_seconds": sys_, "load_average_1m": load}


def _median_runs(runs: list[dict]) -> dict:
    import statistics

    return {
        "runs": runs,
        "median_wall_seconds": statistics.median(r["wall_seconds"] for r in runs),
        "median_cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
    }


def whole_processes(docs: int, seed: int, processes: int, peers: list[str]) -> dict:
    """``python -m dedup_tasks run`` on the hour as a user runs it (start, imports, read, cascade with
    its verifier, write; layers url,exact,simhash,minhash, in-batch: ``--no-registry``), then each
    peer the same way (``_peer_process``: start, read the same Parquet, dedup, write its decisions)."""
    import shutil

    from bench.peers import available_peers
    from dedup_tasks.io import BatchPaths

    root = crawl(docs, 1, seed)
    source = BatchPaths(root, hour_ids(root)[0]).input
    out = WORK / f"whole-process-{docs}"
    ours = []
    for _ in range(processes):
        shutil.rmtree(out, ignore_errors=True)
        ours.append(_child_seconds([
            sys.executable, "-m", "dedup_tasks", "run", "--input", str(source), "--out", str(out),
            "--layers", ",".join(CASCADE_LAYERS), "--no-registry", "--no-progress",
        ]))  # fmt: skip
    result = {"command": f"python -m dedup_tasks run --input HOUR --out DIR --layers {','.join(CASCADE_LAYERS)} --no-registry", "crawl-dedup": _median_runs(ours)}
    ready = set(available_peers())
    for name in peers:
        if name not in ready:
            result[name] = {"skipped": "not installed (make bench)"}
            continue
        runs = [_child_seconds([sys.executable, "-m", "bench", "_peer_process", name, str(source), str(out / f"{name}.parquet")]) for _ in range(min(processes, 3))]
        result[name] = _median_runs(runs)
        result[name]["cpu_ratio_peer_over_ours"] = result[name]["median_cpu_seconds"] / result["crawl-dedup"]["median_cpu_seconds"]
    shutil.rmtree(out, ignore_errors=True)
    return result


def peer_process(name: str, source: Path, out: Path) -> None:
    """One peer as a whole process: read the hour, order it like the product, dedup, write."""
    from bench.peers import run_peer
    from dedup_tasks.io import read_input

    docs = read_input(source)[0].to_pandas().sort_values(["fetched_at", "doc_id"], kind="stable")
    out.parent.mkdir(parents=True, exist_ok=True)
    run_peer(name, docs).to_parquet(out)


# Fresh processes per size: this VM's first-run timings spread +-20%, so the median of several is
# reported, with the range. Large hours run once: they measure memory more than speed.
THROUGHPUT_PROCESSES = 5


def cmd_throughput(
    sizes: list[int], seed: int, processes: int = THROUGHPUT_PROCESSES, peers: tuple[str, ...] | list[str] = WHOLE_PROCESS_PEERS
) -> dict:
    import compileall
    import statistics

    from dedup_tasks.warmup import compile_bytecode

    # As `make install` leaves it: every process below (ours and the peers' harness) loads bytecode
    # instead of compiling modules from source where PYTHONDONTWRITEBYTECODE is set.
    compile_bytecode()
    compileall.compile_dir(Path(__file__).parent, quiet=1)
    load_at_start = os.getloadavg()
    runs = []
    for docs in sizes:
        crawl(docs, 1, seed)  # generate outside the measured processes
        small = docs <= 50_000
        children = []
        for _ in range(processes if small else 1):
            proc = subprocess.run(
                [sys.executable, "-m", "bench", "_throughput_child", str(docs), str(seed), "--repeats", str(THROUGHPUT_REPEATS if small else 1)],
                check=True,
                capture_output=True,
                text=True,
            )
            children.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        firsts = [c["cascade_docs_per_s"] for c in children]
        # The process with the median first run stands for the size (its per-layer rates are shown).
        median_child = sorted(children, key=lambda c: c["cascade_docs_per_s"])[len(children) // 2]
        runs.append(
            {
                **median_child,
                "processes": len(children),
                "first_run_docs_per_s_each_process": firsts,
                "median_first_run_docs_per_s": statistics.median(firsts),
                "median_steady_docs_per_s": statistics.median(c["steady_cascade_docs_per_s"] for c in children),
                "median_end_to_end_docs_per_s": statistics.median(c["end_to_end_docs_per_s"] for c in children),
                "peak_rss_mib": max(c["peak_rss_mib"] for c in children),
            }
        )
        if small:
            runs[-1]["whole_process"] = whole_processes(docs, seed, processes, list(peers))
    lines = [
        f"{'docs':>8}{'procs':>6}{'first run (median, min-max)':>32}{'steady':>10}{'end-to-end':>12}{'peak RSS MiB':>14}"
    ]
    for r in runs:
        spread = f"{min(r['first_run_docs_per_s_each_process']):,.0f}-{max(r['first_run_docs_per_s_each_process']):,.0f}"
        lines.append(
            f"{r['docs']:>8}{r['processes']:>6}{r['median_first_run_docs_per_s']:>14,.0f} ({spread:>15})"
            f"{r['median_steady_docs_per_s']:>10,.0f}{r['median_end_to_end_docs_per_s']:>12,.0f}{r['peak_rss_mib']:>14,.0f}"
        )
        lines.append("    first:  " + "  ".join(f"{k} {v['docs_per_s'] or 0:,.0f}/s" for k, v in r["layers"].items()))
        lines.append("    steady: " + "  ".join(f"{k} {v['docs_per_s'] or 0:,.0f}/s" for k, v in r["steady_layers"].items()))
        for name, w in r.get("whole_process", {}).items():
            if isinstance(w, dict) and "median_cpu_seconds" in w:
                ratio = f"  (CPU {w['cpu_ratio_peer_over_ours']:.2f}x ours)" if "cpu_ratio_peer_over_ours" in w else ""
                lines.append(f"    whole process, {name}: {w['median_wall_seconds']:.2f} s wall, {w['median_cpu_seconds']:.2f} CPU-s (median of {len(w['runs'])}){ratio}")
    lines.append(f"load average at start {load_at_start[0]:.2f}, at end {os.getloadavg()[0]:.2f}")
    table = "\n".join(lines)
    print(table)
    data = {"runs": runs, "table": table, "layers": list(CASCADE_LAYERS), "load_average_start": load_at_start, "load_average_end": os.getloadavg()}
    write_result("throughput", data)
    return data
