"""The crawl_dedup DAG: integrity, and real runs (dag.test) against PostgreSQL compared with the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pendulum
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO

DAGS = REPO / "dags"
EXPECTED_CHAIN = ["validate", "url", "exact", "simhash", "minhash", "semantic", "commit", "publish"]
HOURS = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]


@pytest.fixture(scope="module")
def airflow_db():
    """Airflow's metadata DB (SQLite) in the session's AIRFLOW_HOME."""
    for command in (["db", "migrate"], ["dags", "reserialize"]):
        subprocess.run([sys.executable, "-m", "airflow", *command], check=True, capture_output=True, env=os.environ.copy())


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(DAGS))
    assert bag.import_errors == {}
    return bag.dags["crawl_dedup"]


@pytest.fixture(scope="module")
def sample_crawl(tmp_path_factory) -> Path:
    from bench.generate import generate_crawl

    root = tmp_path_factory.mktemp("crawl")
    generate_crawl(root, 300, hours=3, seed=3)
    return root


def test_dagbag_has_no_import_errors(dag):
    assert dag.dag_id == "crawl_dedup"


def test_task_graph_is_the_cascade(dag):
    assert {t.task_id for t in dag.tasks} == set(EXPECTED_CHAIN)
    for upstream, downstream in zip(EXPECTED_CHAIN, EXPECTED_CHAIN[1:], strict=False):
        assert dag.get_task(downstream).upstream_task_ids == {upstream}
    for task in dag.tasks:
        assert task.retries >= 2
        assert task.execution_timeout is not None
    assert [o.name for o in dag.get_task("publish").outlets] == ["crawl_dedup_deduped"]


def test_schedule_is_hourly_data_intervals(dag):
    from airflow.sdk import CronDataIntervalTimetable

    assert isinstance(dag.timetable, CronDataIntervalTimetable)
    assert dag.max_active_runs == 1


def test_params_are_validated(dag):
    from airflow.sdk.definitions.param import ParamValidationError

    assert dag.params.get_param("minhash_threshold").resolve(0.85) == 0.85
    with pytest.raises(ParamValidationError):
        dag.params.get_param("minhash_threshold").resolve(1.5)
    with pytest.raises(ParamValidationError):
        dag.params.get_param("layers").resolve(["url", "bogus"])
    with pytest.raises(ParamValidationError):
        dag.params.get_param("simhash_max_distance").resolve(-1)
    with pytest.raises(ParamValidationError):
        dag.params.get_param("semantic_sketch_pair_budget").resolve(-1)


def test_a_run_can_raise_the_pair_budget_and_an_empty_param_keeps_the_deployments(dag, monkeypatch):
    from dedup_tasks.airflow_support import config_from_params

    monkeypatch.setenv("DEDUP_SEMANTIC_SKETCH_PAIR_BUDGET", "300")
    param = dag.params.get_param("semantic_sketch_pair_budget")
    assert param.resolve(None) is None  # the trigger form's default
    assert config_from_params({"semantic_sketch_pair_budget": param.resolve(None)}).semantic_sketch_pair_budget == 300
    # A rerun of an hour whose rows were left unread, with a larger budget or none.
    assert config_from_params({"semantic_sketch_pair_budget": param.resolve(2000)}).semantic_sketch_pair_budget == 2000
    assert config_from_params({"semantic_sketch_pair_budget": param.resolve(0)}).semantic_sketch_pair_budget == 0


def _run_dag(dag, root: Path, hour: str, monkeypatch, dsn: str, schema: str) -> None:
    monkeypatch.setenv("DEDUP_ROOT", str(root))
    monkeypatch.setenv("DEDUP_DB_URL", dsn)
    monkeypatch.setenv("DEDUP_DB_SCHEMA", schema)
    start = pendulum.parse(hour + ":00:00+00:00")
    # A manual run's data interval is the hour that ends at its logical date.
    run = dag.test(logical_date=start.add(hours=1))
    assert run.state == "success", f"dag run for {hour} ended {run.state}"


def _run_cli(root: Path, hour: str, dsn: str, schema: str) -> None:
    env = {**os.environ, "DEDUP_DB_URL": dsn, "DEDUP_DB_SCHEMA": schema}
    subprocess.run(
        [sys.executable, "-m", "dedup_tasks", "run", "--root", str(root), "--batch", hour, "--no-progress"],
        check=True, capture_output=True, env=env, cwd=REPO,
    )


def _decisions(root: Path, hour: str):
    from dedup_tasks.io import BatchPaths

    table = pq.read_table(BatchPaths(root, hour).decisions)
    return table.drop_columns(["config_hash"]).to_pandas().sort_values("doc_id").reset_index(drop=True)


def _copy_crawl(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src / "crawl", dst / "crawl")
    return dst


def test_dag_runs_equal_cli_and_reruns_change_nothing(
    dag, airflow_db, sample_crawl, tmp_path, monkeypatch, pg_dsn, registry_schema
):
    from dedup_tasks.io import TEMPLATE_LINES_FILE, BatchPaths

    dag_root = _copy_crawl(sample_crawl, tmp_path / "dag")
    cli_root = _copy_crawl(sample_crawl, tmp_path / "cli")
    for hour in HOURS:
        _run_dag(dag, dag_root, hour, monkeypatch, pg_dsn, registry_schema)
        _run_cli(cli_root, hour, pg_dsn, registry_schema + "_cli")
    for hour in HOURS:
        dag_decisions = _decisions(dag_root, hour)
        assert dag_decisions.equals(_decisions(cli_root, hour)), hour
        assert len(dag_decisions) == 300
        # The staged steps carry the batch's template lines to the published partition, as the CLI does
        # (later hours read registered documents back by them, io.read_published_rows).
        lines = [(BatchPaths(root, hour).deduped / TEMPLATE_LINES_FILE).read_bytes() for root in (dag_root, cli_root)]
        assert lines[0] == lines[1]
    # Hour 01's copies of hour 00 name hour 00.
    cross = _decisions(dag_root, HOURS[1])
    assert (cross.matched_batch_id == HOURS[0]).any()

    # Rerunning hour 01 after hour 02 changes neither its decisions nor the registry.
    from dedup_tasks.registry.postgres import PostgresRegistry

    registry = PostgresRegistry(pg_dsn, schema=registry_schema)
    counts_before = registry.table_stats()
    before = _decisions(dag_root, HOURS[1])
    _run_dag(dag, dag_root, HOURS[1], monkeypatch, pg_dsn, registry_schema)
    assert _decisions(dag_root, HOURS[1]).equals(before)
    assert {k: v["rows"] for k, v in registry.table_stats().items()} == {k: v["rows"] for k, v in counts_before.items()}
    registry.close()
    assert not (dag_root / "work").exists() or not any((dag_root / "work").iterdir())


def test_retried_steps_leave_the_same_outputs(sample_crawl, tmp_path, pg_dsn, registry_schema):
    """Every step is safe to run again (what a retry does): outputs equal a clean run's."""
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths
    from dedup_tasks.registry.postgres import PostgresRegistry
    from dedup_tasks.steps import STEPS, run_step

    clean_root = _copy_crawl(sample_crawl, tmp_path / "clean")
    retry_root = _copy_crawl(sample_crawl, tmp_path / "retry")
    for root, schema, repeat in ((clean_root, registry_schema + "_a", False), (retry_root, registry_schema + "_b", True)):
        config = DedupConfig(root=str(root), db_schema=schema)
        registry = PostgresRegistry(pg_dsn, schema=schema, auto_migrate=True)
        paths = BatchPaths(root, HOURS[0])
        for step in STEPS:
            run_step(step, paths, config, registry)
            if repeat and step not in ("publish",):
                run_step(step, paths, config, registry)
        registry.close()
    assert _decisions(clean_root, HOURS[0]).equals(_decisions(retry_root, HOURS[0]))
    assert pq.read_table(BatchPaths(clean_root, HOURS[0]).deduped).equals(pq.read_table(BatchPaths(retry_root, HOURS[0]).deduped))


def test_missing_partition_fails_clearly(tmp_path, pg_dsn, registry_schema):
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths, InputError
    from dedup_tasks.registry.postgres import PostgresRegistry
    from dedup_tasks.steps import run_step

    registry = PostgresRegistry(pg_dsn, schema=registry_schema, auto_migrate=True)
    with pytest.raises(InputError, match="does not exist"):
        run_step("validate", BatchPaths(tmp_path, "2026-12-01T05"), DedupConfig(root=str(tmp_path)), registry)
    registry.close()
    assert not (tmp_path / "deduped").exists()


def test_steps_confirm_rewrites_by_sentences_as_one_process_does(sample_crawl, tmp_path, pg_dsn, registry_schema):
    """The per-task path hands L4 the input text its sentence confirmation needs, as the CLI's one
    process does: the same cross-encoder drops either way (a head that passes every pair)."""
    pytest.importorskip("torch")
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths, read_input
    from dedup_tasks.pipeline import publish, run_batch
    from dedup_tasks.registry.postgres import PostgresRegistry
    from dedup_tasks.steps import STEPS, run_step
    from tests.embed.fakes import write_cross_encoder

    model = write_cross_encoder(tmp_path / "pass-all.pt", bias=5.0)
    # A low sketch bar and no figure check: the test is of the wiring, and must find pairs on whichever
    # corpus generated the crawl (the shipped sample corpus without DEDUP_EVAL_DATA).
    settings = dict(semantic_sketch=True, minhash_facts_min_new=0,
                    semantic_cross_encoder_en=str(model), semantic_cross_threshold_en=4.0,
                    semantic_cross_encoder_zh=str(model), semantic_cross_threshold_zh=4.0)
    steps_root = _copy_crawl(sample_crawl, tmp_path / "steps")
    one_root = _copy_crawl(sample_crawl, tmp_path / "one")
    schema = registry_schema + "_steps"
    registry = PostgresRegistry(pg_dsn, schema=schema, auto_migrate=True)
    for step in STEPS:
        run_step(step, BatchPaths(steps_root, HOURS[0]), DedupConfig(root=str(steps_root), db_schema=schema, **settings), registry)
    registry.close()
    schema = registry_schema + "_one"
    registry = PostgresRegistry(pg_dsn, schema=schema, auto_migrate=True)
    paths = BatchPaths(one_root, HOURS[0])
    table, _ = read_input(paths.input)
    publish(paths, run_batch(table, HOURS[0], DedupConfig(root=str(one_root), db_schema=schema, **settings), registry))
    registry.close()
    steps = _decisions(steps_root, HOURS[0])
    assert steps.equals(_decisions(one_root, HOURS[0]))
    by_cross = steps[steps.score_kind == "cross_logit"]
    assert len(by_cross) > 0 and by_cross.reason.str.startswith("cross-encoder logit 5.00 >= 4.00 over ").all()
