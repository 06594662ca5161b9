"""Helpers of the fault suite: small synthetic batches (no shared data needed) and the CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, make_batch

WORDS = [f"w{i:04d}" for i in range(4000)]


def text(seed: int, words: int = 120) -> str:
    """A document of random words: distinct seeds give unrelated texts (no layer matches them)."""
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, words)) + "."


def docs(prefix: str, seeds: list[int], host: str = "a.example") -> list[dict]:
    return [
        {"doc_id": f"{prefix}{s}", "url": f"https://{host}/{prefix}/{s}", "title": f"title {s}", "content": text(s)}
        for s in seeds
    ]


def cli(*args: str, env: dict | None = None, check: bool = False, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``python -m dedup_tasks *args`` in a child process; ``stdin`` goes in as bytes (a malformed
    stream included), stdout and stderr come back as text (undecodable bytes replaced)."""
    result = subprocess.run(
        [sys.executable, "-m", "dedup_tasks", *args], input=stdin,
        capture_output=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, check=check, timeout=600,
    )  # fmt: skip
    result.stdout, result.stderr = (stream.decode(errors="replace") for stream in (result.stdout, result.stderr))
    return result


def read_dir(path) -> pa.Table:
    return pq.read_table(path)


@pytest.fixture
def registry_factory(pg_dsn, registry_schema):
    """PostgresRegistry objects on one fresh schema (one object per thread, as the class requires)."""
    from dedup_tasks.registry.postgres import PostgresRegistry

    made = []

    def make(**kwargs):
        registry = PostgresRegistry(pg_dsn, schema=registry_schema, auto_migrate=True, **kwargs)
        made.append(registry)
        return registry

    yield make
    for registry in made:
        registry.close()


__all__ = ["cli", "docs", "make_batch", "read_dir", "text"]
