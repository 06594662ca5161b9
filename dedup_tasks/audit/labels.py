"""Analysts' labels of sampled pairs, stored in PostgreSQL next to the registry.

The table is created here (CREATE ... IF NOT EXISTS) rather than by a registry migration: the
registry's migrations must be numbered 1..n without gaps and another change owns 0002, so a 0003
file could not ship on its own. Moving this DDL into a numbered migration later is a copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg2
import psycopg2.extras
import pyarrow as pa
from psycopg2 import sql

from dedup_tasks.audit.metrics import normalize_label

TABLE = "audit_labels"
LABEL_COLUMNS = [
    "week", "sample_id", "batch_id", "doc_id", "matched_batch_id", "matched_doc_id", "kind", "layer",
    "band", "score", "label", "labelled_by", "labelled_at",
]  # fmt: skip

DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    week             text NOT NULL,
    sample_id        text NOT NULL,
    batch_id         text NOT NULL,
    doc_id           text NOT NULL,
    matched_batch_id text,
    matched_doc_id   text,
    kind             text NOT NULL,
    layer            text,
    band             text,
    score            double precision,
    label            text NOT NULL CHECK (label IN ('duplicate', 'not_duplicate')),
    labelled_by      text NOT NULL,
    labelled_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (week, sample_id)
);
CREATE INDEX IF NOT EXISTS {index} ON {table} (layer, band);
"""


class LabelError(ValueError):
    """A label file or label that cannot be stored; the message names the rows."""


class LabelStore:
    """Read and write `<schema>.audit_labels`. One labeller's latest label per (week, sample) wins."""

    def __init__(self, dsn: str, schema: str = "dedup") -> None:
        self.schema = schema
        self.conn = psycopg2.connect(dsn)
        self.table = sql.Identifier(schema, TABLE)
        self.ensure_table()

    def close(self) -> None:
        self.conn.close()

    def ensure_table(self) -> None:
        with self.conn, self.conn.cursor() as cur:
            # The lock keeps two first-time writers from racing on CREATE TABLE's catalog insert.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"crawl-dedup:audit-labels:{self.schema}",))
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            cur.execute(sql.SQL(DDL).format(table=self.table, index=sql.Identifier(f"{TABLE}_layer_band")))

    def save(self, rows: pd.DataFrame, user: str) -> int:
        """Upsert labels: rows need the sample columns (sample_id, week, batch_id, doc_id, ...) and label."""
        if not user:
            raise LabelError("a label needs the name of who made it")
        rows = rows.copy()
        rows["label"] = rows["label"].map(normalize_label)
        rows = rows[rows["label"].notna()]
        if rows.empty:
            return 0
        values = [
            (
                r["week"], r["sample_id"], r["batch_id"], r["doc_id"], _none(r.get("matched_batch_id")),
                _none(r.get("matched_doc_id")), r.get("kind") or "drop", _none(r.get("layer")),
                _none(r.get("band")), _none(r.get("score")), r["label"], user,
            )  # fmt: skip
            for r in rows.to_dict("records")
        ]
        query = sql.SQL(
            "INSERT INTO {} (week, sample_id, batch_id, doc_id, matched_batch_id, matched_doc_id, kind, layer,"
            " band, score, label, labelled_by) VALUES %s ON CONFLICT (week, sample_id) DO UPDATE SET"
            " label = EXCLUDED.label, labelled_by = EXCLUDED.labelled_by, labelled_at = now()"
        ).format(self.table)
        with self.conn, self.conn.cursor() as cur:
            psycopg2.extras.execute_values(cur, query.as_string(self.conn), values)
        return len(values)

    def load(self, week: str | None = None, up_to_week: str | None = None) -> pd.DataFrame:
        """Labels of one week, or of every week up to and including `up_to_week`, or all."""
        where, params = sql.SQL(""), ()
        if week:
            where, params = sql.SQL(" WHERE week = %s"), (week,)
        elif up_to_week:
            # ISO week strings sort chronologically ("2026-W09" < "2026-W49").
            where, params = sql.SQL(" WHERE week <= %s"), (up_to_week,)
        query = sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(map(sql.Identifier, LABEL_COLUMNS)), self.table
        ) + where + sql.SQL(" ORDER BY week, sample_id")
        with self.conn, self.conn.cursor() as cur:
            cur.execute(query, params)
            data = cur.fetchall()
        return pd.DataFrame(data, columns=LABEL_COLUMNS)


def _none(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else value


def read_label_file(path: Path | str) -> pd.DataFrame:
    """A labelled sample as analysts return it: Parquet or CSV with at least sample_id and label."""
    path = Path(path)
    if path.suffix.lower() in {".parquet", ".pq"}:
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError, pa.ArrowException) as exc:  # junk, truncated, no footer
            raise LabelError(f"{path}: not a readable Parquet file ({exc})") from exc
    elif path.suffix.lower() in {".csv", ".txt"}:
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise LabelError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start}); save the CSV as UTF-8") from exc
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise LabelError(f"{path}: not a readable CSV file ({exc})") from exc
    else:
        raise LabelError(f"{path}: expected a .parquet or .csv file")
    missing = [c for c in ("sample_id", "label") if c not in frame.columns]
    if missing:
        raise LabelError(f"{path}: missing column(s) {missing}; found {list(frame.columns)}")
    return frame


def merge_with_sample(labels: pd.DataFrame, sample: pd.DataFrame, source: str) -> pd.DataFrame:
    """Labels joined to the week's sample by sample_id, so doc ids and strata come from the sample.

    Raises naming the sample ids that are not in the sample and the labels that cannot be read.
    """
    labels = labels[["sample_id", "label"]].copy()
    bad = []
    for sample_id, value in zip(labels["sample_id"], labels["label"], strict=True):
        try:
            normalize_label(value)
        except ValueError:
            bad.append(f"{sample_id}={value!r}")
    if bad:
        raise LabelError(f"{source}: unreadable label(s) {bad[:10]} (use duplicate / not_duplicate)")
    unknown = sorted(set(labels["sample_id"]) - set(sample["sample_id"]))
    if unknown:
        raise LabelError(f"{source}: sample_id(s) not in this week's sample: {unknown[:10]}")
    return sample.drop(columns=["label"]).merge(labels, on="sample_id", how="inner")


@contextmanager
def open_label_store(root: Path | str, db_url: str | None = None, schema: str = "dedup") -> Iterator[LabelStore]:
    """The label store on the registry's database (same resolution: db_url, DEDUP_DB_URL, Airflow, embedded)."""
    from dedup_tasks.registry.connect import database

    with database(root, db_url) as dsn:
        store = LabelStore(dsn, schema)
        try:
            yield store
        finally:
            store.close()
