"""Rebuild the built-in stoplist of the registry's index signature from the shipped sample corpus.

    python -m bench.sample_corpus.stoplist

``dedup_tasks/fingerprint/stoplists/en-5gram-sotu-df2pct-v1.u32`` is the product's English 5-grams in
more than 2% of the sample corpus' 404 English articles (State of the Union addresses, public domain),
learned by the product's own learner (``dedup_tasks.stoplist_learn``). A test rebuilds it and compares
it byte for byte; a change to the shingles or their hash changes it, and with it every registry key
(its key space), so such a change must ship a new stoplist name.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from dedup_tasks.fingerprint.stoplist import DEFAULT_STOPLIST, STOPLIST_DIR, Stoplist
from dedup_tasks.stoplist_learn import learn_from_table

HERE = Path(__file__).resolve().parent
CUTOFF = 0.02


def sample_english() -> pa.Table:
    """The sample corpus' English articles as an input batch (one fetch time: the order is doc_id's)."""
    rows = [json.loads(line) for line in (HERE / "corpora" / "en_sample_sotu.jsonl").read_text(encoding="utf-8").splitlines()]
    fetched = pa.array([datetime(2026, 1, 1, tzinfo=UTC)] * len(rows), pa.timestamp("us", tz="UTC"))
    return pa.table(
        {
            "doc_id": [r["id"] for r in rows],
            "url": [r["url"] for r in rows],
            "title": [r["title"] for r in rows],
            "content": [r["text"] for r in rows],
            "fetched_at": fetched,
            "lang": [r["lang"] for r in rows],
        }
    )


def build() -> Stoplist:
    return learn_from_table(sample_english(), DEFAULT_STOPLIST, cutoff=CUTOFF)


def main() -> int:
    stoplist = build()
    path = STOPLIST_DIR / f"{DEFAULT_STOPLIST}.u32"
    stoplist.save(path)
    print(f"{path}: {len(stoplist):,} shingles ({stoplist.key_space})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
