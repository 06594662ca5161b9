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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
WORK = BENCH_DIR / "work"
SIZES = {
    "tiny": {"docs": 2_000, "hours": 2, "throughput_sizes": ["20k"]},
    "small": {"docs": 20_000, "hours": 1, "throughput_sizes": ["20k"]},
    "medium": {"docs": 20_000, "hours": 2, "throughput_sizes": ["20k", "60k"]},
    "large": {"docs": 20_000, "hours": 2, "throughput_sizes": ["20k", "60k", "200k"]},
    # Three hours through the registry (issue #17's registry run; docs/near-copies.md).
    "hours3": {"docs": 20_000, "hours": 3, "throughput_sizes": ["20k"]},
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


# ---- whole processes (bench.throughput) ---------------------------------------------------------


def peer_process(name: str, source: Path, out: Path) -> None:
    """One peer as a whole process: read the hour, order it like the product, dedup, write."""
    from bench.peers import run_peer
    from dedup_tasks.io import read_input

    docs = read_input(source)[0].to_pandas().sort_values(["fetched_at", "doc_id"], kind="stable")
    out.parent.mkdir(parents=True, exist_ok=True)
    run_peer(name, docs).to_parquet(out)
