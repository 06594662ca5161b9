import pytest

from dedup_tasks.config import ConfigError, DedupConfig


def test_precedence_defaults_yaml_env_overrides(tmp_path):
    yaml_file = tmp_path / "dedup.yaml"
    yaml_file.write_text("minhash_threshold: 0.85\nsimhash_max_distance: 2\nlayers: [url, exact]\n")
    env = {"DEDUP_CONFIG": str(yaml_file), "DEDUP_SIMHASH_MAX_DISTANCE": "1", "DEDUP_ROOT": "/data"}
    config = DedupConfig.load({"minhash_threshold": 0.9}, env=env)
    assert config.minhash_threshold == 0.9  # override wins
    assert config.simhash_max_distance == 1  # env beats YAML
    assert config.layers == ("url", "exact")  # YAML beats defaults
    assert config.root == "/data"


def test_config_hash_tracks_decision_settings_only():
    base = DedupConfig()
    assert base.config_hash == DedupConfig(root="/elsewhere", db_url="postgresql://x").config_hash
    assert base.config_hash != DedupConfig(minhash_threshold=0.85).config_hash
    # Embeddings are bit-identical whatever the thread count: it decides nothing.
    assert base.config_hash == DedupConfig(embed_threads=1).config_hash


@pytest.mark.parametrize(
    "values, message",
    [
        ({"nope": 1}, "unknown config key"),
        ({"layers": "url,bogus"}, "unknown layer"),
        ({"minhash_threshold": "high"}, "minhash_threshold"),
        ({"minhash_bands": 43}, "bands"),  # 43 x 3 rows > 128 permutations
        ({"embed_threads": -1}, "embed_threads"),
        ({"semantic_cross_encoder_en": "m.pt"}, "semantic_cross_encoder_en needs semantic_cross_threshold_en"),
        ({"semantic_sketch_threshold_zh": 1.5}, "semantic_sketch_threshold_zh"),
    ],
)
def test_bad_values_are_named(values, message):
    with pytest.raises(ConfigError, match=message):
        DedupConfig.from_mapping(values)


def test_semantic_layer_is_on_by_default_with_rewrite_candidates():
    from dedup_tasks.config import ALL_LAYERS, DedupConfig

    config = DedupConfig()
    assert config.layers == ALL_LAYERS and config.layer_enabled("semantic")
    assert config.semantic_mode == "suspects"
    assert config.semantic_sketch  # rewrite candidates too
    # Per-language thresholds from the environment, "none" falls back to semantic_threshold.
    loaded = DedupConfig.load(env={"DEDUP_SEMANTIC_THRESHOLD_ZH": "none", "DEDUP_SEMANTIC_THRESHOLD_EN": "0.99"})
    assert loaded.semantic_threshold_for("zh") == loaded.semantic_threshold
    assert loaded.semantic_threshold_for("en") == 0.99
