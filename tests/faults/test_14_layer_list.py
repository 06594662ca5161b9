"""Row 14: one validation of the effective configuration, whatever its source. An empty layer list
(``--set layers=$UNSET``) ran no layer at all and published the hour undeduplicated; an unknown,
repeated or reordered list is refused the same way from every source, before any input is read."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from dedup_tasks.config import ConfigError, DedupConfig
from tests.faults.conftest import cli, docs, make_batch

EMPTY = ["", " ", ",", " , "]
WRONG = {"minhash,url": "cascade order", "url,url": "twice", "url,bogus": "unknown layer"}


@pytest.fixture
def hot(tmp_path):
    src = tmp_path / "hot.parquet"
    rows = docs("d", list(range(10)))
    pq.write_table(make_batch(rows + [{**r, "doc_id": r["doc_id"] + "-copy"} for r in rows]), src)
    return src


@pytest.mark.parametrize("value", EMPTY)
def test_an_empty_layer_list_is_refused_from_the_cli_and_nothing_is_published(tmp_path, hot, value):
    out = tmp_path / "out"
    result = cli("run", "--input", str(hot), "--out", str(out), "--no-registry", "--no-progress", "--set", f"layers={value}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == [
        "error: config key 'layers': must name at least one layer of url,exact,simhash,minhash,semantic; an empty list deduplicates nothing"
    ]
    assert not out.exists()  # nothing read, nothing published


def test_an_empty_layer_list_is_refused_from_the_environment_and_yaml(tmp_path, hot):
    result = cli("run", "--input", str(hot), "--out", str(tmp_path / "o"), "--no-registry", env={"DEDUP_LAYERS": ""})
    assert result.returncode == 2 and "layers" in result.stderr
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("layers: []\n")
    result = cli("run", "--input", str(hot), "--out", str(tmp_path / "o"), "--no-registry", env={"DEDUP_CONFIG": str(yaml_file)})
    assert result.returncode == 2 and "layers" in result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value, needle", WRONG.items())
def test_a_wrong_layer_list_is_refused_from_every_source(tmp_path, value, needle):
    from dedup_tasks.airflow_support import config_from_params

    sources = {
        "--set": lambda: DedupConfig.load({"layers": value}, env={}),
        "DEDUP_LAYERS": lambda: DedupConfig.load(env={"DEDUP_LAYERS": value}),
        "replace": lambda: DedupConfig().replace(layers=tuple(value.split(","))),
        "constructor": lambda: DedupConfig(layers=tuple(value.split(","))),
        "DAG Params": lambda: config_from_params({"layers": value.split(",")}),
    }
    for name, make in sources.items():
        with pytest.raises(ConfigError, match=needle):
            make()
        assert name  # every source went through the one validate()


def test_a_layer_subset_in_cascade_order_is_accepted():
    assert DedupConfig.load({"layers": "url,minhash"}, env={}).layers == ("url", "minhash")
    assert DedupConfig.load({"layers": " exact , semantic "}, env={}).layers == ("exact", "semantic")


def test_other_fields_are_checked_in_the_same_place():
    for changes, needle in (({"minhash_min_coverage": -0.5}, "minhash_min_coverage"), ({"embedder": "gpt"}, "embedder"),
                            ({"embed_device": "tpu"}, "embed_device"), ({"minhash_registry_threshold": -0.1}, "registry_threshold")):
        with pytest.raises(ConfigError, match=needle):
            DedupConfig().replace(**changes)
