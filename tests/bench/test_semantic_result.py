"""What a committed ``bench semantic`` result records of its settings."""

from __future__ import annotations

import pytest

from bench.semantic import bench_config
from dedup_tasks.config import DedupConfig


def test_a_cross_encoder_file_is_named_by_file_name_and_model_id_not_path(tmp_path) -> None:
    pytest.importorskip("torch")
    from tests.embed.fakes import write_cross_encoder

    model = write_cross_encoder(tmp_path / "cross_en.pt", bias=0.0)
    config = DedupConfig(semantic_sketch=True, semantic_sketch_confirm="cross", semantic_cross_encoder_en=str(model),
                         semantic_cross_threshold_en=2.37)
    recorded = bench_config(config)
    assert recorded["semantic_cross_encoder_en"].startswith("cross_en.pt (cross-e5-")
    assert str(tmp_path) not in repr(recorded)
    assert recorded["semantic_cross_threshold_en"] == 2.37 and recorded["semantic_cross_encoder_zh"] == ""
