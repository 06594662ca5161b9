"""The dedup_registry_maintenance DAG: integrity, and a real run (dag.test) against PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.embed.stored import StoredEncoder, content_keys
from tests.dags.test_crawl_dedup import DAGS, airflow_db  # noqa: F401 - the module-scoped fixture
from tests.embed.fakes import FakeEmbedder


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(DAGS))
    assert bag.import_errors == {}
    return bag.dags["dedup_registry_maintenance"]


def test_compaction_then_sentence_pruning_checked_hourly_between_crawl_commits(dag):
    from airflow.sdk import CronTriggerTimetable

    assert [t.task_id for t in dag.tasks] == ["compact", "prune_sentences"]
    assert dag.get_task("compact").downstream_task_ids == {"prune_sentences"}
    assert isinstance(dag.timetable, CronTriggerTimetable)
    assert dag.max_active_runs == 1 and not dag.catchup
    task = dag.get_task("compact")
    assert task.retries >= 2 and task.execution_timeout is not None
    assert dag.params.get_param("min_docs").resolve(0) == 0
    assert dag.params.get_param("sentence_retention_days").resolve(None) is None


def test_a_run_compacts_only_past_the_threshold(dag, airflow_db, tmp_path, monkeypatch, pg_dsn, registry_schema):  # noqa: F811
    import pendulum

    from dedup_tasks.registry.postgres import PostgresRegistry
    from tests.registry.synth import Pool

    registry = PostgresRegistry(pg_dsn, schema=registry_schema, auto_migrate=True, num_perm=32)
    registry.begin("2026-12-01T00")
    registry.commit("2026-12-01T00", Pool(np.random.default_rng(3), 50).batch(40, "d"))
    # Two sentence vectors, one written 40 days ago: only a run with a retention deletes it.
    sentences = StoredEncoder(FakeEmbedder().encode, registry.embedding_store, "fake#sentence@128")
    sentences(["An old sentence.", "A recent sentence."])
    with registry._transaction() as cur:
        cur.execute("UPDATE embeddings SET registered_at = now() - interval '40 days' WHERE doc_id = %s",
                    (str(content_keys(["An old sentence."])[0]),))
    for task_id in ("compact", "prune_sentences"):
        monkeypatch.setattr(dag.get_task(task_id), "retries", 0)  # a failure shows at once, not after retries
    monkeypatch.setenv("DEDUP_ROOT", str(tmp_path))
    monkeypatch.setenv("DEDUP_DB_URL", pg_dsn)
    monkeypatch.setenv("DEDUP_DB_SCHEMA", registry_schema)
    when = pendulum.datetime(2026, 12, 1, 0, 30, tz="UTC")
    assert dag.test(logical_date=when).state == "success"
    assert registry.recent_docs() == 40  # 40 < the default threshold of 1M: nothing moved
    found, _ = registry.embedding_store.get("fake#sentence@128", content_keys(["An old sentence."]), np.array(["*"], object))
    assert found.all()  # no retention set: nothing pruned
    run = dag.test(logical_date=when.add(hours=1), run_conf={"min_docs": 10, "sentence_retention_days": 30})
    assert run.state == "success"
    assert registry.recent_docs() == 0
    assert registry.table_stats()["documents"]["rows"] == 40
    keys = content_keys(["An old sentence.", "A recent sentence."])
    found, _ = registry.embedding_store.get("fake#sentence@128", keys, np.array(["*", "*"], object))
    assert found.tolist() == [False, True]
    registry.close()
