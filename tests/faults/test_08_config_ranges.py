"""Row 8: every config field is range-checked; a bad value is a clear ConfigError naming the field and
value, whether it comes from ``--set``, a ``DEDUP_*`` variable or the YAML file (never a crash)."""

from __future__ import annotations

import pytest

from dedup_tasks.config import ConfigError, DedupConfig
from tests.faults.conftest import cli

BAD = [
    ("minhash_registry_bands", "-3"),
    ("registry_signature_bits", "33"),
    ("simhash_max_distance", "17"),
    ("simhash_min_chars", "-1"),
    ("minhash_bands", "0"),
    ("minhash_rows", "0"),
    ("minhash_num_perm", "0"),
    ("minhash_text_max_partitions", "-1"),
    ("keep_url_updates", "maybe"),
    ("extra", "foo"),
    ("minhash_threshold", "nan"),
    ("semantic_threshold", "inf"),
    ("compact_threshold_docs", "-5"),
    ("db_schema", ""),
]


@pytest.mark.parametrize("name, value", BAD)
def test_set_override_is_rejected_naming_field_and_value(name, value):
    with pytest.raises(ConfigError) as caught:
        DedupConfig.load({name: value}, env={})
    assert name in str(caught.value) and (value or "''") in str(caught.value)


@pytest.mark.parametrize("name, value", BAD[:9])
def test_env_value_is_rejected(name, value):
    with pytest.raises(ConfigError, match=name):
        DedupConfig.load(env={f"DEDUP_{name.upper()}": value})


def test_yaml_value_is_rejected(tmp_path):
    path = tmp_path / "dedup.yaml"
    path.write_text("minhash_bands: 0\n")
    with pytest.raises(ConfigError, match="minhash_bands"):
        DedupConfig.load(env={"DEDUP_CONFIG": str(path)})
    path.write_text("keep_url_updates: maybe\n")
    with pytest.raises(ConfigError, match="keep_url_updates"):
        DedupConfig.load(env={"DEDUP_CONFIG": str(path)})
    # `extra` tags a run (it enters the config hash); a key that names a real field would be ignored.
    path.write_text("extra: {minhash_bands: 3}\n")
    with pytest.raises(ConfigError, match="extra.*minhash_bands"):
        DedupConfig.load(env={"DEDUP_CONFIG": str(path)})
    path.write_text("extra: {experiment: a}\n")
    assert DedupConfig.load(env={"DEDUP_CONFIG": str(path)}).extra == {"experiment": "a"}
    assert DedupConfig.load({"extra": '{"experiment": "b"}'}, env={}).extra == {"experiment": "b"}


def test_booleans_are_parsed_strictly():
    assert DedupConfig.load({"keep_url_updates": "off"}, env={}).keep_url_updates is False
    assert DedupConfig.load({"keep_url_updates": "Yes"}, env={}).keep_url_updates is True
    assert DedupConfig.load(env={"DEDUP_SEMANTIC_SKETCH": "no"}).semantic_sketch is False


def test_bands_and_rows_must_fit_num_perm():
    with pytest.raises(ConfigError, match="minhash_bands"):
        DedupConfig(minhash_num_perm=64, minhash_bands=21, minhash_rows=6)
    assert DedupConfig(minhash_num_perm=64, minhash_bands=16, minhash_rows=4).minhash_bands == 16


@pytest.mark.parametrize("setting", ["minhash_bands=0", "registry_signature_bits=33", "extra=foo", "keep_url_updates=maybe"])
def test_cli_prints_one_error_line_not_a_crash(tmp_path, setting):
    result = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--no-registry", "--set", setting)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and setting.split("=")[0] in lines[0]
