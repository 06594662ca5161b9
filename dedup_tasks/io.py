"""Reading input partitions and writing outputs atomically (temporary name, then rename)."""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_tasks.contract import ContractError, conform_schema

_BATCH_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2})$")


class InputError(ValueError):
    """An input file or partition that cannot be read; the message names it."""


class OutputError(OSError):
    """An output that could not be written (disk full, permissions); the message names it."""


def partition_of(batch_id: str) -> str:
    """'2026-12-01T00' -> 'dt=2026-12-01/hour=00'; any other id -> 'batch=<id>'."""
    m = _BATCH_RE.match(batch_id)
    return f"dt={m.group(1)}/hour={m.group(2)}" if m else f"batch={batch_id}"


def parse_batch_id(value: str) -> str:
    """Accept '2026-12-01T00', '2026-12-01T00:00', '2026-12-01T00:00:00+00:00' and normalize to the hour."""
    m = re.match(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2})", value)
    if not m:
        if re.match(r"^[\w.\-]+$", value):
            return value
        raise ValueError(f"batch id {value!r}: expected an hour like 2026-12-01T00")
    return f"{m.group(1)}T{m.group(2)}"


@dataclass(frozen=True)
class BatchPaths:
    """Where a batch's input and outputs live under a data root (DESIGN.md data contract)."""

    root: Path
    batch_id: str
    input_override: Path | None = None

    @property
    def partition(self) -> str:
        return partition_of(self.batch_id)

    @property
    def input(self) -> Path:
        return self.input_override or self.root / "crawl" / self.partition

    @property
    def deduped(self) -> Path:
        return self.root / "deduped" / self.partition

    @property
    def decisions(self) -> Path:
        return self.root / "decisions" / self.partition

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / f"batch_id={self.batch_id}"

    @property
    def summary(self) -> Path:
        return self.run_dir / "summary.json"

    @property
    def work(self) -> Path:
        return self.root / "work" / f"batch_id={self.batch_id}"


def input_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"input partition {path} does not exist")
    files = sorted(p for p in path.rglob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        raise InputError(f"input partition {path} holds no .parquet files")
    return files


def read_input(path: Path) -> tuple[pa.Table, list[Path]]:
    """All Parquet files of a partition as one table, each conformed to the contract schema.

    A file that cannot be read, or that violates the schema, fails the batch naming the file.
    """
    tables = []
    files = input_files(path)
    for file in files:
        try:
            table = pq.read_table(file)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{file}: not a readable Parquet file ({exc})") from exc
        try:
            tables.append(conform_schema(table, str(file)))
        except ContractError:
            raise
    if len(tables) == 1:
        return tables[0], files
    try:
        return pa.concat_tables(tables, promote_options="permissive"), files
    except pa.ArrowException as exc:
        raise InputError(f"{path}: files have incompatible extra columns ({exc})") from exc


def write_parquet_dir(table: pa.Table, final_dir: Path, file_name: str = "part-00000.parquet") -> Path:
    """Write ``table`` as ``final_dir/file_name``, replacing the directory atomically (tmp + rename)."""
    replace_dir(final_dir, lambda tmp: pq.write_table(table, tmp / file_name, compression="zstd"))
    return final_dir / file_name


def replace_dir(final_dir: Path, fill: Callable[[Path], None]) -> Path:
    """Let ``fill`` write a fresh temporary directory, then swap it in for ``final_dir``.

    Readers see the old directory or the new one, never a half-written one; a failing ``fill``
    leaves ``final_dir`` as it was and no temporary files behind.
    """
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = final_dir.parent / f".{final_dir.name}.tmp-{uuid.uuid4().hex}"
    try:
        tmp.mkdir()
        fill(tmp)
        _swap_into_place(tmp, final_dir)
    except OSError as exc:
        raise OutputError(exc.errno, f"{final_dir}: cannot write ({exc})") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final_dir


def write_json(data: dict, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(exc.errno, f"{path}: cannot write ({exc})") from exc


def _swap_into_place(tmp: Path, final_dir: Path) -> None:
    if final_dir.exists():
        old = final_dir.parent / f".{final_dir.name}.old-{uuid.uuid4().hex}"
        os.replace(final_dir, old)
        os.replace(tmp, final_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final_dir)
