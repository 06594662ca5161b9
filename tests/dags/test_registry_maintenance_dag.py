"""The dedup_registry_maintenance DAG: integrity, and a real run (dag.test) against PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest

from tests.dags.test_crawl_dedup import DAGS, airflow_db  # noqa: F401 - the module-scoped fixture


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(DAGS))
    assert bag.import_errors == {}
    return bag.dags["dedup_registry_maintenance"]


def test_one_compaction_task_checked_hourly_between_crawl_commits(dag):
    from airflow.sdk import CronTriggerTimetable

    assert [t.task_id for t in dag.tasks] == ["compact"]
    assert isinstance(dag.timetable, CronTriggerTimetable)
    assert dag.max_active_runs == 1 and not dag.catchup
    task = dag.get_task("compact")
    assert task.retries >= 2 and task.execution_timeout is not None
    assert dag.params.get_param("min_docs").resolve(0) == 0


def test_a_run_compacts_only_past_the_threshold(dag, airflow_db, tmp_path, monkeypatch, pg_dsn, registry_schema):  # noqa: F811
    import pendulum

    from dedup_tasks.registry.postgres import PostgresRegistry
    from tests.registry.synth import Pool

    registry = PostgresRegistry(pg_dsn, schema=registry_schema, auto_migrate=True, num_perm=32)
    registry.begin("2026-12-01T00")
    registry.commit("2026-12-01T00", Pool(np.random.default_rng(3), 50).batch(40, "d"))
    monkeypatch.setattr(dag.get_task("compact"), "retries", 0)  # a failure shows at once, not after retries
    monkeypatch.setenv("DEDUP_ROOT", str(tmp_path))
    monkeypatch.setenv("DEDUP_DB_URL", pg_dsn)
    monkeypatch.setenv("DEDUP_DB_SCHEMA", registry_schema)
    when = pendulum.datetime(2026, 12, 1, 0, 30, tz="UTC")
    assert dag.test(logical_date=when).state == "success"
    assert registry.recent_docs() == 40  # 40 < the default threshold of 1M: nothing moved
    run = dag.test(logical_date=when.add(hours=1), run_conf={"min_docs": 10})
    assert run.state == "success"
    assert registry.recent_docs() == 0
    assert registry.table_stats()["documents"]["rows"] == 40
    registry.close()
