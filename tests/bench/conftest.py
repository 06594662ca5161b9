"""Fixtures for the benchmark tests: a small copy of the evaluation data, and one generated crawl.

The real corpora take ~10 s to load and fold; a few hundred lines of each keep the suite at a few
seconds while running exactly the same code paths (real and synthetic articles, natural duplicates).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.evaldata import eval_data_available, eval_data_dir, missing_reason
from bench.generate import GeneratedCrawl, generate_crawl

DOCS_PER_HOUR = 300
HOURS = 2
_SUBSET = {
    "corpora/en_bbc_news.jsonl": 150,
    "corpora/en_reuters21578.jsonl": 400,  # its first rows hold natural duplicates (reuters-4/16, 32/55)
    "corpora/zh_sogou_smarty.jsonl": 120,  # fewer zh articles than needed: synthetic ones get exercised
    "pairs/zh_lcqmc_dev.jsonl": 800,
    "pairs/zh_atec_train.jsonl": 800,
    "pairs/zh_lcqmc_test.jsonl": 50,  # held-out file: must never be read
}


@pytest.fixture(scope="session")
def mini_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # These tests check the eval corpora's own traits (natural duplicates, held-out pair files).
    if not eval_data_available("corpora"):
        pytest.skip(missing_reason("corpora"))
    root = tmp_path_factory.mktemp("data")
    for rel, n in _SUBSET.items():
        src = eval_data_dir() / rel
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        with src.open(encoding="utf-8") as fh:
            lines = [line for _, line in zip(range(n), fh, strict=False)]
        dst.write_text("".join(lines), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def crawl(mini_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GeneratedCrawl:
    out = tmp_path_factory.mktemp("crawl")
    return generate_crawl(out, DOCS_PER_HOUR, hours=HOURS, seed=7, data_dir=mini_data_dir)
