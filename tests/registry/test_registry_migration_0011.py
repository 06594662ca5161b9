"""Migration 0011 on a registry whose sentence vectors were written under schema 10: the partial index
on their age holds those rows and no other, and the prune deletes through it what it deleted before."""

from __future__ import annotations

import numpy as np
import psycopg2
import pytest

from dedup_tasks.embed.stored import CONTENT_KEYED
from dedup_tasks.registry.embeddings import PostgresEmbeddingStore
from tests.registry.conftest import migrate_to_current, schema_at_version


@pytest.fixture
def v10_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 10) as name:
        yield name


def test_migration_0011_indexes_the_sentence_vectors_age_only(pg_dsn, v10_schema, admin) -> None:
    vector = np.ones(4, np.float32).tobytes()
    with admin.cursor() as cur:  # schema 10's rows: two old sentence vectors, a new one, an old head vector
        for batch, doc, age in [(CONTENT_KEYED, "s-old-1", "40 days"), (CONTENT_KEYED, "s-old-2", "40 days"),
                                (CONTENT_KEYED, "s-new", "1 day"), ("2026-12-01T00", "d1", "40 days")]:
            cur.execute(
                f'INSERT INTO "{v10_schema}".embeddings (model_id, batch_id, doc_id, dim, vector, registered_at)'
                " VALUES ('e5#sentence@128', %s, %s, 4, %s, now() - %s::interval)",
                (batch, doc, vector, age),
            )
    migrate_to_current(pg_dsn, v10_schema, 10)
    with admin.cursor() as cur:
        cur.execute(
            "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'embeddings_content_keyed_age' AND n.nspname = %s",
            (v10_schema,),
        )
        (predicate,) = cur.fetchone()
    assert "'*'" in predicate and "batch_id" in predicate
    conn = psycopg2.connect(pg_dsn)
    try:
        assert PostgresEmbeddingStore(conn, v10_schema).prune_content_keyed(30) == {"e5#sentence@128": 2}
    finally:
        conn.close()
    with admin.cursor() as cur:
        cur.execute(f'SELECT doc_id FROM "{v10_schema}".embeddings ORDER BY doc_id')
        assert [row[0] for row in cur.fetchall()] == ["d1", "s-new"]
