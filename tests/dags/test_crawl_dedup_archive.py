"""The crawl_dedup_archive DAG: integrity and validated Params (the Spark run itself is tested in tests/engines)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.dags["crawl_dedup_archive"]


def test_one_spark_task_started_by_hand(dag):
    assert [t.task_id for t in dag.tasks] == ["dedup_archive"]
    assert type(dag.timetable).__name__ == "NullTimetable"  # schedule=None: started by hand
    assert dag.tasks[0].retries >= 2 and dag.tasks[0].execution_timeout is not None


def test_params_are_validated(dag):
    from airflow.sdk.definitions.param import ParamValidationError

    assert dag.params.get_param("partitions").resolve(8) == 8
    with pytest.raises(ParamValidationError):
        dag.params.get_param("partitions").resolve(0)
    with pytest.raises(ParamValidationError):
        dag.params.get_param("layers").resolve(["url", "bogus"])


def test_missing_hours_are_a_clear_error(tmp_path, monkeypatch):
    from dedup_tasks.airflow_support.archive import run_archive
    from dedup_tasks.io import InputError

    # A run's root must be the data root or under it (issue #16 row 4).
    monkeypatch.setenv("DEDUP_ROOT", str(tmp_path))

    from airflow.sdk.exceptions import AirflowFailException

    # No retry can make the hours appear: the task fails at once (tests/faults row 20).
    with pytest.raises(AirflowFailException, match="no input partition") as failed:
        run_archive({"root": str(tmp_path), "first_batch": "2026-12-01T00", "last_batch": "2026-12-01T02"})
    assert isinstance(failed.value.__cause__, InputError)
