"""Reading input partitions and writing outputs atomically (temporary name, then rename)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dedup_tasks.contract import ContractError, conform_schema

_BATCH_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2})$")


class InputError(ValueError):
    """An input file or partition that cannot be read; the message names it."""


class MissingPartition(InputError):
    """The hour's input partition does not exist or holds no Parquet file: nothing to deduplicate yet.

    Retrying cannot help until the crawl writes it, so orchestrators fail such a run at once (the
    Airflow DAG raises AirflowFailException) instead of holding the run slot through retries.
    """


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
        raise InputError(f"batch id {value!r}: expected an hour like 2026-12-01T00 (or letters, digits, '.', '_', '-')")
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
        raise MissingPartition(f"input partition {path} does not exist")
    files = sorted(p for p in path.rglob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        raise MissingPartition(f"input partition {path} holds no .parquet files")
    return files


def check_input(path: Path) -> list[Path]:
    """The cheap check a run makes before it starts anything (a registry, Spark): the partition exists,
    holds Parquet files, and each one opens with a readable Parquet footer. Reads no row."""
    try:
        files = input_files(path)
    except OSError as exc:
        raise InputError(f"input partition {path} cannot be listed ({exc.strerror or exc})") from exc
    for file in files:
        try:
            with pq.ParquetFile(file) as parquet:
                parquet.metadata  # noqa: B018 - the footer is read here
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{file}: not a readable Parquet file ({exc})") from exc
    return files


def read_input(path: Path) -> tuple[pa.Table, list[Path]]:
    """All Parquet files of a partition as one table, each conformed to the contract schema.

    A file that cannot be read, or that violates the schema, fails the batch naming the file.
    """
    tables = []
    files = input_files(path)
    for file in files:
        try:
            # One file at a time through ParquetFile, not read_table: read_table goes through
            # pyarrow.dataset, whose import alone (it imports pandas) costs a run ~0.4 CPU-s.
            with pq.ParquetFile(file) as parquet:
                table = parquet.read()
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


# A published partition keeps its batch's template lines (normalize.text.template_lines) beside its
# Parquet files, so a later run can read one earlier document back and strip exactly the lines its
# batch stripped when it was fingerprinted, instead of reading the whole partition to learn them
# again. The name starts with "_": Parquet readers (pyarrow, Spark) skip it. Inside the pipeline the
# lines travel in the prepared table's schema metadata (TEMPLATE_LINES_KEY) to the publish step.
TEMPLATE_LINES_FILE = "_template_lines.u64"
TEMPLATE_LINES_KEY = b"crawl_dedup.template_lines"
# Row groups small enough that reading a few documents back reads a few groups, not the hour.
PUBLISHED_ROW_GROUP_ROWS = 4096


def with_template_lines(table: pa.Table, templates: np.ndarray) -> pa.Table:
    """``table`` with ``templates`` (uint64 line hashes) in its schema metadata."""
    encoded = base64.b64encode(np.ascontiguousarray(templates, "<u8").tobytes())
    return table.replace_schema_metadata({**(table.schema.metadata or {}), TEMPLATE_LINES_KEY: encoded})


def template_lines_of(schema: pa.Schema) -> np.ndarray | None:
    """The template lines ``with_template_lines`` stored (None: a table without them)."""
    value = (schema.metadata or {}).get(TEMPLATE_LINES_KEY)
    return None if value is None else np.frombuffer(base64.b64decode(value), "<u8").astype(np.uint64)


def carry_template_lines(source: pa.Table, table: pa.Table) -> pa.Table:
    """``table`` with ``source``'s template lines, if it has them (renames and selects drop metadata)."""
    templates = template_lines_of(source.schema)
    return table if templates is None else with_template_lines(table, templates)


def write_template_lines(folder: Path, templates: np.ndarray) -> None:
    """The partition folder's TEMPLATE_LINES_FILE (written into the temporary folder of the publish)."""
    (folder / TEMPLATE_LINES_FILE).write_bytes(np.ascontiguousarray(templates, "<u8").tobytes())


def write_published(table: pa.Table, folder: Path, file_name: str = "part-00000.parquet") -> None:
    """A kept partition's file (zstd, row groups of PUBLISHED_ROW_GROUP_ROWS) and, when ``table``
    carries them, its batch's template lines beside it."""
    templates = template_lines_of(table.schema)
    if templates is not None:
        metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != TEMPLATE_LINES_KEY}
        table = table.replace_schema_metadata(metadata or None)
        write_template_lines(folder, templates)
    pq.write_table(table, folder / file_name, compression="zstd", row_group_size=PUBLISHED_ROW_GROUP_ROWS)


@dataclass
class PublishedRows:
    """Rows read back from a published partition. ``templates`` is None for a partition published
    without its template lines (by code before per-document reads): ``table`` is then the whole
    partition, and the template lines must be learned over it, as before."""

    table: pa.Table
    templates: np.ndarray | None
    row_groups_read: int = 0


def read_published_rows(path: Path, doc_ids: np.ndarray | list[str]) -> PublishedRows:
    """The rows of ``doc_ids`` in the published partition ``path`` (a directory of Parquet files or a
    file): the doc_id column first, then only the row groups holding a wanted document. Raises
    OSError / FileNotFoundError for a partition that is gone or unreadable; a doc_id not in the
    partition is simply not returned."""
    files = input_files(path) if path.exists() else []
    if not files:
        raise FileNotFoundError(f"published partition {path} not found")
    parquets = [pq.ParquetFile(f) for f in files]
    folder = path if path.is_dir() else path.parent
    if not (folder / TEMPLATE_LINES_FILE).exists():
        whole = [p.read() for p in parquets]
        return PublishedRows(pa.concat_tables(whole, promote_options="permissive"), None, sum(p.num_row_groups for p in parquets))
    templates = np.frombuffer((folder / TEMPLATE_LINES_FILE).read_bytes(), "<u8").astype(np.uint64)
    wanted = pa.array(sorted({str(d) for d in doc_ids}), pa.string())
    parts, groups_read = [], 0
    for parquet in parquets:
        ids = parquet.read(columns=["doc_id"]).column(0).cast(pa.string())
        hit = np.flatnonzero(pc.is_in(ids, value_set=wanted).to_numpy(zero_copy_only=False))
        if not len(hit):
            continue
        sizes = np.array([parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)], np.int64)
        ends = np.cumsum(sizes)
        group_of_hit = np.searchsorted(ends, hit, side="right")
        groups = np.unique(group_of_hit)
        # Position of each hit among the rows of the groups read: its offset in its group plus the
        # rows of the groups read before it.
        before = np.zeros(len(groups), np.int64)
        np.cumsum(sizes[groups][:-1], out=before[1:])
        local = hit - (ends - sizes)[group_of_hit] + before[np.searchsorted(groups, group_of_hit)]
        parts.append(parquet.read_row_groups(groups.tolist()).take(pa.array(local)))
        groups_read += len(groups)
    table = pa.concat_tables(parts, promote_options="permissive") if parts else parquets[0].schema_arrow.empty_table()
    return PublishedRows(table, templates, groups_read)


def write_parquet_dir(table: pa.Table, final_dir: Path, file_name: str = "part-00000.parquet") -> Path:
    """Write ``table`` as ``final_dir/file_name``, replacing the directory atomically (tmp + rename)."""
    replace_dir(final_dir, lambda tmp: pq.write_table(table, tmp / file_name, compression="zstd"))
    return final_dir / file_name


def replace_dir(final_dir: Path, fill: Callable[[Path], None]) -> Path:
    """Let ``fill`` write a fresh temporary directory, then swap it in for ``final_dir``.

    Readers see the old directory or the new one, never a half-written one; a failing ``fill``
    leaves ``final_dir`` as it was and no temporary files behind.
    """
    tmp = final_dir.parent / f".{final_dir.name}.tmp-{uuid.uuid4().hex}"
    try:
        final_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        fill(tmp)
        _swap_into_place(tmp, final_dir)
    except OSError as exc:
        raise OutputError(exc.errno, f"{final_dir}: cannot write ({exc})") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final_dir


# ---- one atomic publish of a batch's outputs ------------------------------------------------------
# decisions/, deduped/ and runs/.../summary.json live in three directories, so no single rename can
# swap them. A publish therefore (1) writes all three under temporary names beside their final places,
# (2) writes a journal (runs/batch_id=.../publish.json, itself by rename) listing the renames, (3) does
# the renames and (4) removes the journal. A crash before (2) leaves the old outputs and temporaries
# that the next run removes; a crash after (2) is rolled forward by the next run (or `show`), which
# completes the renames from the journal. Either way the three outputs end up from one run.
JOURNAL = "publish.json"
# Test hook (issue #16 row 5): kill -9 this process after this many renames of a publish ("0": once
# the journal is written, before any rename; "staged": before the journal).
CRASH_ENV = "DEDUP_TEST_CRASH_PUBLISH"


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), 9)


def publish_outputs(
    root: Path, run_dir: Path, dirs: list[tuple[Path, Callable[[Path], None]]], files: list[tuple[Path, str]]
) -> None:
    """Publish directories (each filled by a callable) and text files as one step (see JOURNAL)."""
    recover_outputs(root, run_dir, [d for d, _ in dirs] + [f for f, _ in files])
    token = uuid.uuid4().hex
    moves: list[tuple[Path, Path]] = []
    try:
        for final, fill in dirs:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = final.parent / f".{final.name}.tmp-{token}"
            tmp.mkdir()
            moves.append((tmp, final))
            fill(tmp)
        for final, text in files:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = final.with_name(f".{final.name}.tmp-{token}")
            moves.append((tmp, final))
            tmp.write_text(text)
        _crash_point("staged")
        journal = {"token": token, "moves": [[str(a.relative_to(root)), str(b.relative_to(root))] for a, b in moves]}
        run_dir.mkdir(parents=True, exist_ok=True)
        journal_tmp = run_dir / f".{JOURNAL}.tmp-{token}"
        journal_tmp.write_text(json.dumps(journal))
        os.replace(journal_tmp, run_dir / JOURNAL)
    except OSError as exc:
        for tmp, _ in moves:
            _remove(tmp)
        failed = next((b for a, b in moves if not a.exists()), moves[-1][1] if moves else run_dir)
        raise OutputError(exc.errno, f"{failed}: cannot write ({exc})") from exc
    except BaseException:
        for tmp, _ in moves:
            _remove(tmp)
        raise
    _crash_point("0")
    _roll_forward(root, run_dir, journal)


def _roll_forward(root: Path, run_dir: Path, journal: dict) -> None:
    for k, (tmp_rel, final_rel) in enumerate(journal["moves"]):
        tmp, final = root / tmp_rel, root / final_rel
        if tmp.exists():  # not yet renamed (a crash stopped the publish here)
            if tmp.is_dir():
                _swap_into_place(tmp, final)
            else:
                os.replace(tmp, final)
        _crash_point(str(k + 1))
    (run_dir / JOURNAL).unlink(missing_ok=True)


def recover_outputs(root: Path, run_dir: Path, finals: list[Path]) -> bool:
    """Finish a publish a crash interrupted (journal present), then remove stale temporaries of
    ``finals``. Returns True when a publish was rolled forward."""
    rolled = False
    journal_path = run_dir / JOURNAL
    if journal_path.exists():
        try:
            journal = json.loads(journal_path.read_text())
        except ValueError:
            journal = None  # a torn journal is never renamed into place; treat as absent
        if journal is not None:
            _roll_forward(root, run_dir, journal)
            rolled = True
        journal_path.unlink(missing_ok=True)
    for final in [*finals, journal_path]:
        if final.parent.exists():
            for stale in final.parent.glob(f".{final.name}.tmp-*"):
                _remove(stale)
            for stale in final.parent.glob(f".{final.name}.old-*"):
                _remove(stale)
    return rolled


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


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
