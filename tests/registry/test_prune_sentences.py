"""`db prune-sentences`: the content-keyed sentence vectors are a cache that can be cut by age."""

from __future__ import annotations

import numpy as np
import psycopg2
from psycopg2 import sql

from dedup_tasks.embed.stored import CONTENT_KEYED, StoredEncoder, content_keys
from dedup_tasks.registry.cli import db_main
from dedup_tasks.registry.embeddings import PostgresEmbeddingStore
from tests.embed.fakes import FakeEmbedder

MODEL = "fake:trigram#sentence@128"


def test_prune_deletes_old_sentence_vectors_only_and_moves_the_generation(pg_dsn, schema, admin, capsys):
    conn = psycopg2.connect(pg_dsn)
    try:
        store = PostgresEmbeddingStore(conn, schema)
        fake = FakeEmbedder()
        StoredEncoder(fake.encode, store, MODEL)(["An old sentence.", "A recent sentence."])
        # A document's head vector (a real batch id) of the same age is never a sentence vector.
        store.put("fake:trigram", np.array(["d1"], object), np.array(["2026-12-01T00"], object), np.ones((1, 4), np.float32))
        with admin.cursor() as cur:
            # Every row written 40 days ago, but for the recent sentence.
            cur.execute(sql.SQL("UPDATE {} SET registered_at = now() - interval '40 days'").format(sql.Identifier(schema, "embeddings")))
            cur.execute(
                sql.SQL("UPDATE {} SET registered_at = now() WHERE batch_id = %s AND doc_id = %s").format(
                    sql.Identifier(schema, "embeddings")),
                (CONTENT_KEYED, _key("A recent sentence.")),
            )
        before = store.generation(MODEL)
        base = ["--db-url", pg_dsn, "--schema", schema]
        assert db_main([*base, "prune-sentences", "--older-than-days", "30"]) == 0
        out = capsys.readouterr().out
        assert f"{MODEL}: 1 sentence vectors deleted" in out and "pruned 1 sentence vectors older than 30 days" in out
        assert store.generation(MODEL) != before
        # The old sentence is embedded again when asked for; the recent one and the head vector stay.
        fake.calls.clear()
        StoredEncoder(fake.encode, store, MODEL)(["An old sentence.", "A recent sentence."])
        assert fake.encoded == ["An old sentence."]
        found, _ = store.get("fake:trigram", np.array(["d1"], object), np.array(["2026-12-01T00"], object))
        assert found.all()
        assert db_main([*base, "prune-sentences", "--older-than-days", "-1"]) == 2
    finally:
        conn.close()


def _key(text: str) -> str:
    return str(content_keys([text])[0])


def test_the_prune_reads_the_partial_index_of_schema_11(pg_dsn, schema) -> None:
    conn = psycopg2.connect(pg_dsn)
    try:
        store = PostgresEmbeddingStore(conn, schema)
        StoredEncoder(FakeEmbedder().encode, store, MODEL)([f"Sentence {i}." for i in range(50)])
        query, params = store._prune_statement(30)
        with conn, conn.cursor() as cur:
            # Any plan that can use the index prefers it once a scan of the table is priced out; a
            # predicate the index does not imply leaves the planner only the table or the primary key.
            cur.execute("SET LOCAL enable_seqscan = off")
            cur.execute(sql.SQL("EXPLAIN ") + query, params)
            plan = "\n".join(row[0] for row in cur.fetchall())
            conn.rollback()
        assert "embeddings_content_keyed_age" in plan, plan
    finally:
        conn.close()
