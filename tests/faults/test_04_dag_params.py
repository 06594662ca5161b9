"""#16 row 4: the DAG's ``root`` Param was not confined (``../../../elsewhere`` wrote a Bloom file
and registry rows outside the data root) and ``layers: []`` ran no layer at all.

Decision: a run's ``root`` may be the configured data root (DEDUP_ROOT / the config file's root,
default ./data) or a directory under it; a relative root is taken under the data root; ``..`` and
symlinks are resolved before the check. ``layers`` must name at least one known layer. The checks
live in ``dedup_tasks.config`` (``run_config``); the DAG's task function calls it, and the DAG turns
its ConfigError into a failure without retries.
"""

from __future__ import annotations

import pendulum
import pytest

from dedup_tasks.config import ConfigError


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("DEDUP_ROOT", str(root))
    monkeypatch.delenv("DEDUP_CONFIG", raising=False)
    return root


def _context(params: dict) -> dict:
    return {"params": params, "data_interval_start": pendulum.datetime(2026, 12, 1, 0, tz="UTC")}


@pytest.mark.parametrize("root", ["../../../elsewhere", "../elsewhere", "sub/../../elsewhere", "/", "/tmp"])
def test_a_root_outside_the_data_root_is_refused(data_root, root):
    from dedup_tasks.airflow_support import config_from_params, run_step

    with pytest.raises(ConfigError, match="outside the configured data root"):
        config_from_params({"root": root, "layers": ["url", "exact"]})
    # The task function refuses before it touches anything (no registry, no files), and at once (row 20).
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="outside the configured data root") as failed:
        run_step("validate", _context({"root": root, "layers": ["url", "exact"]}))
    assert isinstance(failed.value.__cause__, ConfigError)
    assert not any((data_root.parent / "elsewhere").iterdir())


def test_a_symlink_out_of_the_data_root_is_refused(data_root):
    from dedup_tasks.airflow_support import config_from_params

    (data_root / "link").symlink_to(data_root.parent / "elsewhere", target_is_directory=True)
    with pytest.raises(ConfigError, match="outside"):
        config_from_params({"root": str(data_root / "link")})


@pytest.mark.parametrize("root", [None, "sub", "./sub", "{data}", "{data}/sub", "{data}/sub/../sub", "."])
def test_the_data_root_and_paths_under_it_are_accepted(data_root, root):
    from dedup_tasks.airflow_support import config_from_params

    given = None if root is None else root.format(data=data_root)
    config = config_from_params({"root": given, "layers": ["url"]})
    if root is None:
        assert config.root == str(data_root)  # the configured data root itself
    else:
        assert config.root == str(data_root.resolve() / "sub" if "sub" in root else data_root.resolve())


@pytest.mark.parametrize("layers", [[], ["bogus"], ""])
def test_an_empty_or_unknown_layer_list_is_refused(data_root, layers):
    from dedup_tasks.airflow_support import config_from_params

    with pytest.raises(ConfigError, match="layer"):
        config_from_params({"layers": layers})


def test_the_dag_params_refuse_an_empty_layer_list():
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.definitions.param import ParamValidationError

    from tests.conftest import REPO

    dag = DagBag(str(REPO / "dags")).dags["crawl_dedup"]
    with pytest.raises(ParamValidationError):
        dag.params.get_param("layers").resolve([])
    assert dag.params.get_param("layers").resolve(["url"]) == ["url"]


def test_the_dag_fails_a_bad_param_without_retries(data_root, monkeypatch):
    """The DAG's step wrapper maps the library's ConfigError to AirflowFailException."""
    import importlib.util

    from airflow.sdk.exceptions import AirflowFailException

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("crawl_dedup_dag", REPO / "dags" / "crawl_dedup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "get_current_context", lambda: _context({"root": "../elsewhere", "layers": ["url"]}))
    with pytest.raises(AirflowFailException, match="outside the configured data root"):
        module._step("validate")
