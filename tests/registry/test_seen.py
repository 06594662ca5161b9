"""`seen` and `db export-bloom` on the demo's crawl, registered by the real pipeline in PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from tests.conftest import REPO

HOURS = ("2026-12-01T00", "2026-12-01T02")
UNPARSABLE = ["", "not a url", "ftp://example.com/file", "http://", "https://exa mple.com/x", "mailto:a@b.c",
              "https://[::1/", "javascript:alert(1)", "//no-scheme.example.com/x", "http://300.1.1.1/"]
TEMPLATES = ["ftp://example.com/{i}", "https://bad host{i}.com/", "mailto:u{i}@example.org", "not a url {i}"]


def cli(*args: str, env: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dedup_tasks", *args], input=stdin, capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **env}, check=True)


@pytest.fixture(scope="module")
def demo(tmp_path_factory, pg_dsn):
    """The demo's sample crawl (3 hours) run through L1-L3 with a PostgreSQL registry."""
    import psycopg2

    root = tmp_path_factory.mktemp("seen-demo")
    schema = "t_seen_" + os.urandom(4).hex()
    env = {"DEDUP_DB_URL": pg_dsn, "DEDUP_DB_SCHEMA": schema, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "bench.generate", "--source", "sample", "--docs", "300", "--hours", "3",
                    "--seed", "0", "--out", str(root)], cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, **env})
    cli("run", "--root", str(root), "--batch", HOURS[0], "--until", HOURS[1], "--layers", "url,exact,simhash,minhash",
        "--no-progress", env=env)
    yield root, env
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _expected(root: Path) -> dict[str, tuple[str, str]]:
    """page (canonical URL, https written as http: what L1 keys) -> (batch_id, doc_id) of its first kept
    (= registered) document, from the published files."""
    from dedup_tasks.normalize.url import InvalidURL, canonical_url, page_identity

    decisions = ds.dataset(str(root / "decisions"), format="parquet", partitioning="hive").to_table(
        columns=["batch_id", "doc_id", "action"]).to_pandas()
    crawl = ds.dataset(str(root / "crawl"), format="parquet", partitioning="hive").to_table(
        columns=["doc_id", "url", "dt", "hour"]).to_pandas()
    crawl["batch_id"] = crawl["dt"].astype(str) + "T" + crawl["hour"].astype(str).str.zfill(2)
    kept = decisions[decisions["action"] == "keep"].merge(crawl[["batch_id", "doc_id", "url"]], on=["batch_id", "doc_id"])
    out: dict[str, tuple[str, str]] = {}
    for row in kept.sort_values(["batch_id"], kind="stable").itertuples():
        with contextlib.suppress(InvalidURL):
            out.setdefault(page_identity(canonical_url(row.url)), (row.batch_id, row.doc_id))
    return out


def _queries(root: Path, registered: dict[str, tuple[str, str]]) -> list[str]:
    """1,000 URLs: 500 registered (some written another way: tracking parameter, upper-case host, default
    port), 450 not registered, 50 unparsable."""
    rng = np.random.default_rng(1)
    canon = sorted(registered)
    picked = [canon[i] for i in rng.choice(len(canon), 500, replace=len(canon) < 500)]
    variants = []
    for i, url in enumerate(picked):
        if i % 5 == 1:
            url += ("&" if "?" in url else "?") + "utm_source=frontier"
        elif i % 5 == 2:
            scheme, rest = url.split("://", 1)
            host, _, path = rest.partition("/")
            url = f"{scheme}://{host.upper()}/{path}"
        elif i % 5 == 3 and url.startswith("https://"):
            scheme, rest = url.split("://", 1)
            host, _, path = rest.partition("/")
            url = f"https://{host}:443/{path}"
        variants.append(url)
    unseen = [f"https://{c.split('://', 1)[1].split('/', 1)[0]}/never-crawled/{i}" for i, c in enumerate(canon[:450])]
    unparsable = UNPARSABLE + [TEMPLATES[i % len(TEMPLATES)].format(i=i) for i in range(50 - len(UNPARSABLE))]
    urls = variants + unseen + unparsable
    return [urls[i] for i in rng.permutation(len(urls))]


def _check(answers: list[dict], urls: list[str], registered: dict[str, tuple[str, str]]) -> dict[str, int]:
    from dedup_tasks.normalize.url import InvalidURL, canonical_url, page_identity

    assert [a["url"] for a in answers] == urls
    counts = {"seen": 0, "unseen": 0, "unparsable": 0}
    for url, a in zip(urls, answers, strict=True):
        try:
            canon = canonical_url(url)
        except InvalidURL as exc:
            assert a["seen"] is None and a["canonical_url"] is None and a["reason"] == exc.reason, a
            counts["unparsable"] += 1
            continue
        assert a["canonical_url"] == canon, a
        page = page_identity(canon)
        if page in registered:
            assert a["seen"] is True and (a["batch_id"], a["doc_id"]) == registered[page] and a["reason"] is None, a
            counts["seen"] += 1
        else:
            assert a["seen"] is False and a["batch_id"] is None and a["doc_id"] is None, a
            assert a["reason"].startswith("not registered"), a
            counts["unseen"] += 1
    return counts


def test_seen_answers_every_demo_url_right_with_and_without_the_filter(demo):
    root, env = demo
    registered = _expected(root)
    urls = _queries(root, registered)
    assert len(urls) == 1000
    stdin = "\n".join(urls) + "\n"
    with_bloom = cli("seen", "--root", str(root), env=env, stdin=stdin)
    answers = [json.loads(line) for line in with_bloom.stdout.splitlines()]
    assert _check(answers, urls, registered) == {"seen": 500, "unseen": 450, "unparsable": 50}
    # Most unregistered URLs were answered by the filter alone; the count line says so.
    by_filter = sum(a["reason"] == "not registered (URL Bloom filter)" for a in answers)
    assert by_filter >= 440
    assert f"{by_filter} answered by the Bloom filter" in with_bloom.stderr
    without = cli("seen", "--root", str(root), "--no-bloom", env=env, stdin=stdin)
    plain = [json.loads(line) for line in without.stdout.splitlines()]
    assert [(a["seen"], a["batch_id"], a["doc_id"]) for a in plain] == [(a["seen"], a["batch_id"], a["doc_id"]) for a in answers]


def test_a_saturated_filter_never_says_seen_falsely(demo, pg_dsn, tmp_path):
    """A filter sized for 10 keys says "maybe" to almost everything: the registry must still decide."""
    from dedup_tasks.config import DEFAULT_TRACKING_PARAMS
    from dedup_tasks.registry.seen import SeenIndex, answer_stream

    root, env = demo
    registered = _expected(root)
    urls = _queries(root, registered)
    lines = [urls[i:i + 300] for i in range(0, len(urls), 300)]

    class Sink:
        def __init__(self) -> None:
            self.data = b""

        def write(self, b: bytes) -> None:
            self.data += b

        def flush(self) -> None:
            pass

    out = Sink()
    with SeenIndex(pg_dsn, env["DEDUP_DB_SCHEMA"], tmp_path / "tiny.npy", capacity=10, fp_rate=0.5) as index:
        stats = answer_stream(index, lines, DEFAULT_TRACKING_PARAMS, out)
        assert index.bloom is not None and index.bloom.bloom.fill_ratio() > 0.9
    assert stats["bloom_no"] < 50 and stats["queries"] == 4
    answers = [json.loads(line) for line in out.data.splitlines()]
    assert _check(answers, urls, registered) == {"seen": 500, "unseen": 450, "unparsable": 50}
    assert (tmp_path / "tiny.npy").exists()  # built here, saved for the next caller


def _reader() -> dict:
    text = (REPO / "docs" / "seen.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len(block.strip().splitlines()) <= 30, "the documented reader must stay within 30 lines"
    namespace: dict = {}
    exec(compile(block, "docs/seen.md", "exec"), namespace)  # noqa: S102 - the documented reader, as published
    return namespace


def _registry_filter(root: Path, dsn: str, schema: str):
    """The filter the pipeline's registry uses: its file, caught up with the registry (bloom.load_synced)."""
    import psycopg2

    from dedup_tasks.registry import bloom as bloom_mod
    from dedup_tasks.registry.connect import bloom_path

    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f'SET search_path TO "{schema}"')
        persisted, _ = bloom_mod.load_synced(cur, bloom_path(root))
    return persisted


def test_exported_filter_read_by_the_documented_reader_agrees_with_the_registry(demo, pg_dsn, tmp_path):
    from dedup_tasks.registry.bloom_export import BloomFileError, read_exported

    root, env = demo
    out = tmp_path / "frontier" / "urls.bloom"
    printed = cli("db", "--root", str(root), "--schema", env["DEDUP_DB_SCHEMA"], "export-bloom", "--out", str(out), env=env).stdout
    assert "written to" in printed and not list(out.parent.glob(".*tmp"))
    reader = _reader()
    exported = reader["load"](str(out))
    registry_filter = _registry_filter(root, pg_dsn, env["DEDUP_DB_SCHEMA"])
    ours = read_exported(out)
    assert (ours.bloom.words == registry_filter.bloom.words).all() and ours.watermark == registry_filter.watermark
    registered = _expected(root)
    assert all(reader["maybe_seen"](exported, url) for url in registered)
    # Unregistered URLs: the documented reader answers exactly as the registry's filter does.
    import xxhash

    others = [f"https://elsewhere.example/{i}" for i in range(3000)]
    keys = np.array([xxhash.xxh64_intdigest(u.encode()) for u in others], np.uint64)
    assert [reader["maybe_seen"](exported, u) for u in others] == registry_filter.bloom.contains(keys).tolist()
    # A flipped byte is refused by both readers.
    data = bytearray(out.read_bytes())
    data[100] ^= 0x10
    (tmp_path / "bad.bloom").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt"):
        reader["load"](str(tmp_path / "bad.bloom"))
    with pytest.raises(BloomFileError, match="CRC"):
        read_exported(tmp_path / "bad.bloom")


def test_answers_stay_right_after_a_compaction_moved_the_recent_tier(demo):
    """Compaction moves every registered row to the main tier and TRUNCATEs the recent one."""
    root, env = demo
    cli("db", "--root", str(root), "--schema", env["DEDUP_DB_SCHEMA"], "compact", env=env)
    registered = _expected(root)
    urls = _queries(root, registered)
    done = cli("seen", "--root", str(root), env=env, stdin="\n".join(urls) + "\n")
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert _check(answers, urls, registered) == {"seen": 500, "unseen": 450, "unparsable": 50}
