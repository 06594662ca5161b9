"""A small generated crawl week with near duplicates at graded edit rates, run through the real cascade."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import publish, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import make_batch, write_partition

HOURS = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]  # ISO week 2026-W49
WEEK = "2026-W49"
SITES = ["news.example.com", "www.daily.example.org", "blog.example.net", "zh.example.cn"]
ZH_CHARS = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你"
EDIT_RATES = [0.0, 0.004, 0.01, 0.02, 0.035, 0.05, 0.08, 0.15]


def _vocab(rng: np.random.Generator, n: int = 600) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=rng.integers(3, 9))) for _ in range(n)]


def _edit(words: list[str], rate: float, rng: np.random.Generator, vocab: list[str]) -> list[str]:
    out = list(words)
    for i in range(len(out)):
        if rng.random() < rate:
            out[i] = vocab[rng.integers(len(vocab))]
    return out


def generate_rows(seed: int = 7, base_per_hour: int = 40) -> dict[str, list[dict]]:
    """Rows per hour: fresh documents, graded near copies (same and earlier hours), exact copies,
    URL repeats and a few Chinese documents."""
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng)
    earlier: list[list[str]] = []
    hours: dict[str, list[dict]] = {}
    n = 0
    for hour in HOURS:
        rows = []
        fresh = []
        for _ in range(base_per_hour):
            words = [vocab[i] for i in rng.integers(len(vocab), size=int(rng.integers(90, 160)))]
            fresh.append(words)
        sources = fresh + earlier
        for words in fresh:
            rows.append(("base", words))
        for _ in range(base_per_hour):
            src = sources[rng.integers(len(sources))]
            rate = EDIT_RATES[rng.integers(len(EDIT_RATES))]
            rows.append(("copy", _edit(src, rate, rng, vocab)))
        out = []
        for kind, words in rows:
            n += 1
            site = SITES[n % 3]
            text = " ".join(words)
            if "." not in text[-1:]:
                text = ". ".join(" ".join(words[i:i + 12]) for i in range(0, len(words), 12)) + "."
            out.append({"doc_id": f"d{n:05d}", "url": f"https://{site}/a/{n}", "title": f"{kind} {n}",
                        "content": text, "lang": "en"})
        for k in range(6):  # Chinese: a base and a one-character edit of it
            n += 1
            base = "".join(rng.choice(list(ZH_CHARS), size=220))
            out.append({"doc_id": f"d{n:05d}", "url": f"https://zh.example.cn/p/{n}", "title": "中文",
                        "content": base, "lang": "zh"})
            n += 1
            edited = base[:100] + "国" + base[101:] if k % 2 else base
            out.append({"doc_id": f"d{n:05d}", "url": f"https://zh.example.cn/p/{n}", "title": "中文",
                        "content": edited, "lang": "zh"})
        # A URL repeat with the same content: an L1 drop.
        n += 1
        out.append({**out[0], "doc_id": f"d{n:05d}"})
        order = rng.permutation(len(out))
        hours[hour] = [out[i] for i in order]
        earlier.extend(fresh)
    return hours


def config_for(root: Path, **changes: object) -> DedupConfig:
    return DedupConfig.load({"root": str(root), "layers": "url,exact,simhash,minhash"}).replace(**changes)


def run_week(root: Path, config: DedupConfig, write_crawl: bool = True,
             rows: dict[str, list[dict]] | None = None, hours: list[str] | None = None) -> pd.DataFrame:
    """Write the crawl (optionally), run every hour in order on one in-memory registry, publish decisions.

    `hours`: other hour ids for the generated hours (another week), in HOURS' order."""
    rows = rows or generate_rows()
    registry = MemoryRegistry()
    frames = []
    for i, hour in enumerate(hours or HOURS):
        table: pa.Table = make_batch(rows[HOURS[i]], start=pd.Timestamp(f"{hour}:00:00Z") + pd.Timedelta(seconds=i))
        if write_crawl:
            write_partition(root, hour, table)
        result = run_batch(table, hour, config, registry)
        publish(BatchPaths(root, hour), result)
        frames.append(result.decisions.to_pandas())
    return pd.concat(frames, ignore_index=True)
