"""StoredEncoder: a text's vector is embedded once in a store's life, found again by its content."""

from __future__ import annotations

import numpy as np

from dedup_tasks.embed.stored import CONTENT_KEYED, StoredEncoder, content_keys, sentence_model_id
from dedup_tasks.registry.embeddings import EmbeddingStore, MemoryEmbeddingStore
from tests.embed.fakes import FakeEmbedder
from tests.embed.test_store import pg_store  # noqa: F401 - the PostgreSQL store fixture

TEXTS = ["The mayor opened the bridge.", "Traffic was light on Monday.", "The mayor opened the bridge.", "雨下了一整天。"]


def check_reuse(store: EmbeddingStore) -> None:
    fake = FakeEmbedder()
    encode = StoredEncoder(fake.encode, store, "fake:trigram#sentence@128")
    first = encode(TEXTS)
    # Rows in the order asked, a repeated text embedded once, each the vector the model gives.
    assert np.allclose(first, FakeEmbedder().encode(TEXTS), atol=1e-6)
    assert sorted(fake.encoded) == sorted(set(TEXTS)) and encode.embedded == 3 and encode.reused == 0
    fake.calls.clear()
    again = StoredEncoder(fake.encode, store, "fake:trigram#sentence@128")
    second = again(["Traffic was light on Monday.", "A new sentence.", "雨下了一整天。"])
    # Only the text never embedded before reaches the model; the others come back as they were.
    assert fake.encoded == ["A new sentence."] and again.reused == 2 and again.embedded == 1
    assert np.allclose(second[[0, 2]], first[[1, 3]], atol=1e-6)
    # Another model's (or token cap's) sentences are never returned for this one.
    other = StoredEncoder(fake.encode, store, "other#sentence@128")
    fake.calls.clear()
    other(["Traffic was light on Monday."])
    assert fake.encoded == ["Traffic was light on Monday."]
    found, _ = store.get("fake:trigram#sentence@128", content_keys(TEXTS[:2]), np.full(2, CONTENT_KEYED, object))
    assert found.all()


def test_memory_store_keeps_sentence_vectors() -> None:
    check_reuse(MemoryEmbeddingStore())


def test_postgres_store_keeps_sentence_vectors(pg_store) -> None:  # noqa: F811
    check_reuse(pg_store)


def test_an_empty_call_embeds_nothing() -> None:
    fake = FakeEmbedder()
    assert StoredEncoder(fake.encode, MemoryEmbeddingStore(), "m")([]).shape[0] == 0


def test_content_keys_tell_texts_apart_and_name_a_token_cap() -> None:
    keys = content_keys(["a", "b", "a", "A"])
    assert keys[0] == keys[2] and len({keys[0], keys[1], keys[3]}) == 3
    assert sentence_model_id("e5", 128) != sentence_model_id("e5", 64)
