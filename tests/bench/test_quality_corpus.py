"""``python -m bench quality --corpus sample``: the crawl is built from the shipped sample corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import bench.__main__ as bench_cli
import bench.harness as bench_main
from bench.corpus import SAMPLE_CORPUS_FILES


def test_sample_corpus_crawl_is_cached_apart_and_made_of_sample_texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_main, "WORK", tmp_path)
    root = bench_main.crawl(120, 1, seed=3, source="sample")
    assert root.name.endswith("-sample") and (root / "truth.parquet").is_file()
    # Never the eval crawl's cache entry: a sample run must not overwrite or reuse it.
    assert root != tmp_path / root.name.removesuffix("-sample")

    sample_titles = set()
    corpora = Path(bench_main.__file__).parent / "sample_corpus" / "corpora"
    for files in SAMPLE_CORPUS_FILES.values():
        for name in files:
            with (corpora / name).open(encoding="utf-8") as fh:
                sample_titles.update(json.loads(line)["title"] for line in fh)
    (part,) = sorted((root / "crawl").glob("dt=*/hour=*"))
    titles = pq.read_table(next(part.glob("*.parquet")), columns=["title"]).column("title").to_pylist()
    # Originals keep their corpus title; most crawl rows are originals or exact copies of one.
    assert sum(t in sample_titles for t in titles) > len(titles) // 2


def test_quality_command_takes_the_corpus_option() -> None:
    with pytest.raises(SystemExit):
        bench_cli.main(["quality", "--corpus", "nosuch"])
