"""Compile the numba kernels once and leave them in their ``__pycache__`` (``cache=True``).

``make install`` runs ``python -m dedup_tasks.warmup``: it deduplicates a small built-in English and
Chinese batch through L0-L3 (the semantic layer has no numba kernels) and the registry's band join,
so every kernel the pipeline calls is compiled with the argument types a real batch gives it. A
later process (an Airflow task, the CLI) then loads the machine code from the cache instead of
spending about a minute compiling. It prints how many kernels came from the cache, so running it
twice shows the cache works: the second run compiles nothing. The NFKC fold table
(``normalize.fold``) and the character class table (``normalize.codepoint_kernels``) are built and
saved the same way, once, and the package's modules are byte-compiled (``compile_bytecode``).

Every kernel's cache is stamped with all of the package's kernel files at once
(``dedup_tasks.kernel_cache``; numba alone stamps a kernel with its own file, so a caller would keep
an old callee inlined), so editing any kernel file, moving the checkout or changing the CPU
recompiles (once) by itself.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa

_EN = (
    "The council approved the new budget on Tuesday after a long debate about road repairs. "
    "Residents had asked for more money for schools, parks and the public library. "
    "The mayor said the plan balances the needs of every district without raising taxes."
)
_ZH = "市政府周二通过了新的预算方案，重点用于道路维修和公共交通。居民代表希望增加学校和公园的经费。市长表示这项计划兼顾了各区的需要，同时不会提高税收。"
# Short items of one site behind its lead-in, and a typo repost: the short-text and lead-in kernels.
_BRIEFS = (
    "City brief (automated summary, not reviewed): Council approves budget",
    "City brief (automated summary, not reviewed): Library opens late",
    "City brief (automated summary, not reviewed): Road repairs start",
    "City brief (automated summary, not reviewed): Council approves budgte",
)


def _batch() -> pa.Table:
    """Copies, near copies and distinct texts in both languages, so every layer has work to do."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(48):
        lang_text = _EN if i % 2 else _ZH
        variant = i % 6
        body = lang_text if variant < 2 else f"{lang_text} {variant} {i}" if variant < 4 else f"{i} " * 40 + lang_text[: 30 + i]
        rows.append(
            {
                "doc_id": f"warmup-{i}",
                "url": f"https://warmup.invalid/{i % 40}?utm_source=x",
                "title": f"Warm-up {i % 12}",
                "content": body,
                "fetched_at": t0 + timedelta(seconds=i),
            }
        )
    for i, text in enumerate(_BRIEFS):
        rows.append({"doc_id": f"warmup-brief-{i}", "url": f"https://briefs.invalid/{i}", "title": None, "content": text,
                     "fetched_at": t0 + timedelta(seconds=100 + i)})  # fmt: skip
    table = pa.Table.from_pylist(rows)
    return table.set_column(4, "fetched_at", table.column("fetched_at").cast(pa.timestamp("us", tz="UTC")))


def _dispatchers() -> list:
    from numba.core.registry import CPUDispatcher

    import dedup_tasks.fingerprint.candidates as candidates
    import dedup_tasks.fingerprint.kernels as kernels
    import dedup_tasks.fingerprint.leadin as leadin
    import dedup_tasks.normalize.codepoint_kernels as codepoint_kernels
    import dedup_tasks.normalize.fold as fold
    import dedup_tasks.registry._bandblocks as bandblocks
    import dedup_tasks.registry._bandjoin as bandjoin

    modules = (kernels, candidates, leadin, codepoint_kernels, fold, bandjoin, bandblocks)
    return [f for m in modules for f in vars(m).values() if isinstance(f, CPUDispatcher)]


def warm_up() -> dict[str, object]:
    """Run the kernels once; return seconds and how many kernel signatures were loaded or compiled."""
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.normalize import fold
    from dedup_tasks.pipeline import run_batch
    from dedup_tasks.registry import _bandjoin
    from dedup_tasks.registry.base import MemoryRegistry

    t0 = time.perf_counter()
    table_saved = fold.table_path().exists()
    # No published partitions exist here: registry candidates are judged on their signature, quietly.
    config = DedupConfig.load({"layers": "url,exact,simhash,minhash", "minhash_text_max_partitions": 0})
    registry = MemoryRegistry()
    run_batch(_batch(), "2026-01-01T00", config, registry)
    run_batch(_batch(), "2026-01-01T01", config, registry)  # the cross-batch paths
    rng = np.random.default_rng(0)
    _bandjoin.band_join(np.sort(rng.integers(0, 2**63, 64, dtype=np.uint64)), rng.integers(0, 2**63, 8, dtype=np.uint64), 3)
    _warm_band_blocks(rng)
    loaded = compiled = 0
    for dispatcher in _dispatchers():
        loaded += sum(dispatcher.stats.cache_hits.values())
        compiled += sum(dispatcher.stats.cache_misses.values())
    return {
        "seconds": time.perf_counter() - t0, "loaded_from_cache": loaded, "compiled": compiled,
        "fold_table": "loaded" if table_saved else ("built and saved" if fold.table_path().exists() else "built (not writable)"),
    }  # fmt: skip


def _warm_band_blocks(rng: np.random.Generator) -> None:
    """The PostgreSQL registry's block decoders and in-memory joins (recent tier, small main runs), on COPY
    bytes as a lookup reads them."""
    import io

    from dedup_tasks.registry import _bandblocks
    from dedup_tasks.registry._pgio import encode_binary_copy

    keys = rng.integers(0, 2**63, 512, dtype=np.uint64)
    seqs = np.arange(512, dtype=np.int64)
    recent = _bandblocks.recent_rows(keys, seqs)
    raw = encode_binary_copy([("int8", recent["seq_base"]), ("varbytea", recent["entries"])])
    _bandblocks.SortedProbes(keys[:64], np.arange(64)).join_copy(io.BytesIO(raw).getbuffer())
    blocks = _bandblocks.build_blocks(keys, seqs, 8)
    n = len(blocks["n"])  # type: ignore[arg-type]
    cols = [("int8", np.zeros(n, np.int64))] * 2 + [("int8", np.ones(n, np.int64)), ("int8", blocks["bucket"]),
                                                   ("int8", blocks["seq_base"])]  # fmt: skip
    _bandblocks.decode_copy(io.BytesIO(encode_binary_copy([*cols, ("varbytea", blocks["entries"])])).getbuffer(), 4)
    wide = encode_binary_copy([*cols, ("int8", np.full(n, 4, np.int64)), ("varbytea", blocks["entries"])])
    _bandblocks.decode_copy(io.BytesIO(wide).getbuffer(), with_width=True)
    # A small main run read whole (_pg_lookups, _minhash_matches): bucket, seq_base, entries.
    whole = encode_binary_copy([("int8", blocks["bucket"]), ("int8", blocks["seq_base"]), ("varbytea", blocks["entries"])])
    _bandblocks.SortedProbes(keys[:64], np.arange(64)).join_blocks_copy(io.BytesIO(whole).getbuffer(), 8, 4)


def compile_bytecode() -> int:
    """Write the ``.pyc`` of every module of the package; returns how many were (re)written.

    Python writes them on first import, except where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
    benchmark VM): there every process compiled the package's ~14,000 lines from source again
    (~0.04-0.1 CPU-s of a 20k-doc ``python -m dedup_tasks run``, docs/performance.md). A ``.pyc``
    older than its source is ignored by Python, so an edit never runs stale code."""
    import compileall
    from pathlib import Path

    package = Path(__file__).parent
    before = {p: p.stat().st_mtime_ns for p in package.rglob("*.pyc")}
    compileall.compile_dir(package, quiet=1)
    return sum(1 for p in package.rglob("*.pyc") if before.get(p) != p.stat().st_mtime_ns)


def main() -> int:
    compiled_modules = compile_bytecode()
    result = warm_up()
    print(
        f"numba warm-up: {result['loaded_from_cache']} kernel signatures loaded from the cache, "
        f"{result['compiled']} compiled and cached, NFKC table {result['fold_table']}, {result['seconds']:.1f} s; "
        f"{compiled_modules} module(s) byte-compiled"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
