"""Where the research-only evaluation data lives: one setting, ``DEDUP_EVAL_DATA``.

The evaluation corpora and labelled pair sets (news corpora, paraphrase pairs, URL peer cases) carry
research-only licences, so the project never ships them. Everything that reads them (the benchmark's
``--source eval`` crawls, corpus-backed tests) finds them here, and skips or fails with this module's
message when they are absent. The product itself never needs them.
"""

from __future__ import annotations

import os
from pathlib import Path

EVAL_DATA_ENV = "DEDUP_EVAL_DATA"
REPO = Path(__file__).resolve().parents[1]


def eval_data_dir() -> Path:
    """``$DEDUP_EVAL_DATA``, else ``../shared/data`` beside the repository (may not exist)."""
    configured = os.environ.get(EVAL_DATA_ENV)
    return Path(configured).expanduser() if configured else REPO.parent / "shared" / "data"


def eval_data_available(*parts: str) -> bool:
    return eval_data_dir().joinpath(*parts).exists()


def missing_reason(*parts: str) -> str:
    """The one sentence a skipped test or a refused benchmark prints."""
    return (
        f"evaluation data {eval_data_dir().joinpath(*parts)} not found: set {EVAL_DATA_ENV} to the folder "
        "holding corpora/, pairs/ and url_normalization/ (research-only, not shipped with the project)"
    )
