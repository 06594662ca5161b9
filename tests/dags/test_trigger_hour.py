"""Triggering a given hour from the UI (#12): a ``batch_hour`` Param names the hour (a manual run's
logical date defaults to now, an hour with no data), and ``validate`` fails at once, without retries,
when the hour's partition is missing."""

from __future__ import annotations

import time

import pendulum
import pyarrow.parquet as pq
import pytest

from tests.dags.test_crawl_dedup import HOURS, _copy_crawl, airflow_db, dag, sample_crawl  # noqa: F401 - fixtures


def _env(monkeypatch, root, dsn, schema) -> None:
    monkeypatch.setenv("DEDUP_ROOT", str(root))
    monkeypatch.setenv("DEDUP_DB_URL", dsn)
    monkeypatch.setenv("DEDUP_DB_SCHEMA", schema)


def test_params_offer_the_hour_and_reject_non_hours(dag):  # noqa: F811
    from airflow.sdk.definitions.param import ParamValidationError

    param = dag.params.get_param("batch_hour")
    assert param.resolve(None) is None and param.resolve("2026-12-01T05") == "2026-12-01T05"
    for bad in ("yesterday", "2026-12-01", "2026-12-01T5", "2026-12-01T05/../x"):
        with pytest.raises(ParamValidationError):
            param.resolve(bad)
    assert dag.catchup is False  # unpausing starts at most the latest interval, never a backlog


def test_a_manual_run_deduplicates_the_hour_it_names(
    dag, airflow_db, sample_crawl, tmp_path, monkeypatch, pg_dsn, registry_schema  # noqa: F811
):
    from dedup_tasks.io import BatchPaths

    root = _copy_crawl(sample_crawl, tmp_path / "dag")
    _env(monkeypatch, root, pg_dsn, registry_schema)
    # Logical date "now" (what the UI's trigger form defaults to): the Param, not the date, picks the hour.
    run = dag.test(logical_date=pendulum.now("UTC"), run_conf={"batch_hour": HOURS[0], "layers": ["url", "exact"]})
    assert run.state == "success"
    assert pq.read_table(BatchPaths(root, HOURS[0]).decisions).num_rows == 300


def test_a_missing_hour_fails_at_once_without_retries(
    dag, airflow_db, tmp_path, monkeypatch, pg_dsn, registry_schema  # noqa: F811
):
    _env(monkeypatch, tmp_path, pg_dsn, registry_schema)
    started = time.monotonic()
    run = dag.test(logical_date=pendulum.now("UTC"), run_conf={"batch_hour": "2026-12-01T05"})
    assert run.state == "failed"
    validate = next(ti for ti in run.get_task_instances() if ti.task_id == "validate")
    assert validate.state == "failed" and validate.try_number == 1  # not up_for_retry
    assert time.monotonic() - started < 120  # no 2-minute retry delay was waited out


@pytest.mark.parametrize("state", ["absent", "no parquet", "zero rows"])
def test_validate_raises_missing_partition_for_an_hour_without_data(tmp_path, state, pg_dsn, registry_schema):
    """The library's signal the DAG maps to fail-fast: MissingPartition, for every way an hour has no data."""

    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths, MissingPartition
    from dedup_tasks.registry.postgres import PostgresRegistry
    from dedup_tasks.steps import run_step
    from tests.conftest import make_batch

    paths = BatchPaths(tmp_path, "2026-12-01T05")
    if state != "absent":
        paths.input.mkdir(parents=True)
    if state == "zero rows":
        table = make_batch([{"doc_id": "x", "url": "https://a.example/", "content": "c"}]).slice(0, 0)
        pq.write_table(table, paths.input / "part-0.parquet")
    registry = PostgresRegistry(pg_dsn, schema=registry_schema, auto_migrate=True)
    try:
        with pytest.raises(MissingPartition, match="2026-12-01"):
            run_step("validate", paths, DedupConfig(root=str(tmp_path)), registry)
    finally:
        registry.close()
