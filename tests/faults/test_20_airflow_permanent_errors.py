"""Row 20: an error no retry can fix (the embedded server cannot start, a bad configuration or Param,
a missing partition) fails the Airflow task at once: AirflowFailException, state ``failed`` at try 1,
the run failed, in every task of every DAG in dags/, not only crawl_dedup's ``validate``. Before, such a
task went ``up_for_retry`` and the run held its slot through 2 x 2-5 minutes of retries.

Each task is made the first one to run (its upstream tasks marked successful, ``mark_success_pattern``)
and meets a real permanent error: for tasks that open the registry, ``<root>/registry`` is a file, so
the embedded server cannot start; for the others a ``root`` Param outside the data root."""

from __future__ import annotations

import os

import pendulum
import pytest

from tests.conftest import REPO, write_partition
from tests.dags.test_crawl_dedup import airflow_db  # noqa: F401 - fixture
from tests.faults.conftest import docs, make_batch

HOUR = "2026-12-01T00"
LOGICAL = pendulum.datetime(2026, 12, 1, 1, tz="UTC")
# Tasks that open the registry first: the embedded server that cannot start is their permanent error.
REGISTRY_TASKS = {
    ("crawl_dedup", t) for t in ("validate", "url", "exact", "simhash", "minhash", "semantic", "commit")
} | {("dedup_registry_maintenance", "compact"), ("dedup_registry_maintenance", "prune_sentences")}


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag


def _all_tasks() -> list[tuple[str, str]]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))
    return sorted((dag_id, task.task_id) for dag_id, dag in bag.dags.items() for task in dag.tasks)


ALL_TASKS = _all_tasks()


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    write_partition(root, HOUR, make_batch(docs("d", [1, 2, 3])))
    monkeypatch.setenv("DEDUP_ROOT", str(root))
    for name in ("DEDUP_DB_URL", "AIRFLOW_CONN_DEDUP_DB", "DEDUP_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return root


def _permanent_error(dag_id: str, task_id: str, root) -> dict:
    """Make the task's permanent error real; returns the run's conf."""
    if (dag_id, task_id) in REGISTRY_TASKS:
        (root / "registry").write_text("a file where the registry's folder goes")
        if task_id == "prune_sentences":
            return {"sentence_retention_days": 30}  # without a retention the task opens no registry
        return {"batch_hour": HOUR} if dag_id == "crawl_dedup" else {}
    return {"root": "../outside-the-data-root"}


def test_every_dag_is_covered():
    assert {dag_id for dag_id, _ in ALL_TASKS} == {p.stem for p in (REPO / "dags").glob("*.py") if not p.name.startswith("_")}
    assert len(ALL_TASKS) >= 12


@pytest.mark.parametrize("dag_id, task_id", ALL_TASKS)
def test_a_permanent_error_fails_the_task_at_once_without_retries(bag, airflow_db, data_root, dag_id, task_id):  # noqa: F811
    dag = bag.dags[dag_id]
    conf = _permanent_error(dag_id, task_id, data_root)
    upstream = sorted(dag.get_task(task_id).get_flat_relative_ids(upstream=True))
    pattern = "|".join(upstream) if upstream else None
    run = dag.test(logical_date=LOGICAL, run_conf=conf, mark_success_pattern=pattern)
    states = {ti.task_id: (ti.state, ti.try_number) for ti in run.get_task_instances()}
    assert run.state == "failed", states
    assert states[task_id] == ("failed", 1), states  # not up_for_retry: its retries were never used
    assert dag.get_task(task_id).retries >= 1  # the task does retry other errors


@pytest.mark.parametrize("dag_id, task_id", ALL_TASKS)
def test_every_task_callable_raises_airflow_fail_exception(bag, data_root, monkeypatch, dag_id, task_id):
    """The same, without the scheduler loop: the task's own callable raises AirflowFailException whose
    cause is the library's error."""
    from airflow.sdk.exceptions import AirflowFailException

    conf = _permanent_error(dag_id, task_id, data_root)
    task = bag.dags[dag_id].get_task(task_id)
    context = {"params": {**{k: v for k, v in bag.dags[dag_id].params.items()}, **conf},
               "data_interval_start": LOGICAL.subtract(hours=1), "logical_date": LOGICAL}
    context["params"] = {k: (v.value if hasattr(v, "value") else v) for k, v in context["params"].items()}
    monkeypatch.setitem(task.python_callable.__globals__, "get_current_context", lambda: context)
    args = [None] * task.python_callable.__code__.co_argcount
    with pytest.raises(AirflowFailException) as failed:
        task.python_callable(*args)
    assert failed.value.__cause__ is not None and str(failed.value).startswith("error: ")
    assert "Traceback" not in str(failed.value) and os.linesep not in str(failed.value)
