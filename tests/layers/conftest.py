"""Fixtures shared by the layer tests."""

from __future__ import annotations

import pytest

from dedup_tasks.embed.embedders import register_embedder
from tests.embed.fakes import FakeEmbedder


@pytest.fixture
def fake() -> FakeEmbedder:
    """A deterministic embedder registered as model "fake" for the test, unregistered afterwards."""
    embedder = FakeEmbedder()
    register_embedder("fake", embedder)
    yield embedder
    register_embedder("fake", None)
