"""L4 rewrite candidates (story sketches), vectors stored once across hours, and the embedder device."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_tasks.config import ConfigError, DedupConfig
from dedup_tasks.embed.embedders import resolve_device
from dedup_tasks.embed.faiss_index import PersistentIndex
from dedup_tasks.embed.sketch import SKETCH_DIM, sketch_model_id, story_sketches
from dedup_tasks.layers import semantic
from dedup_tasks.layers.base import LayerContext
from dedup_tasks.layers.near import text_lengths
from dedup_tasks.layers.semantic import SemanticLayer, neighbourhood_cosine
from dedup_tasks.pipeline import prepare, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.embeddings import store_for
from tests.embed.fakes import FakeEmbedder, write_cross_encoder
from tests.layers.batches import prepared_batch

B0, B1 = "2026-12-01T00", "2026-12-01T01"


@pytest.fixture(autouse=True)
def _data_root(tmp_path, monkeypatch) -> None:
    # The sketch history index is written under the config's root, "./data" by default.
    monkeypatch.chdir(tmp_path)

STORY = (
    "Shares of Northwind Traders fell 14 percent on Monday after the company cut its annual forecast, "
    "blaming weak demand in Europe and a strike at its Rotterdam warehouse. Chief executive Maria Olsen "
    "said the strike would cost about 40 million euros."
)
# The same story in other words: few three-word shingles in common, the names and facts all there.
REWRITE = (
    "Northwind Traders stock dropped 14 percent Monday when the firm lowered its forecast for the year. "
    "It pointed to soft European demand and a walkout at the Rotterdam warehouse, which Maria Olsen, "
    "the chief executive, put at roughly 40 million euros."
)
REWRITE_2 = (
    "A strike at the Rotterdam warehouse and weak demand in Europe led Northwind Traders to cut its "
    "forecast; the stock lost 14 percent on Monday. Maria Olsen, chief executive, estimated the strike's "
    "cost at 40 million euros."
)
UNRELATED = (
    "A rare orchid thought extinct for a century was found growing on a cliff in the national park, "
    "botanists said, and seeds will be stored in a seed bank to protect the species."
)
OTHER = (
    "The city council approved a new budget on Tuesday that raises spending on public transport by "
    "twelve percent and adds three bus lines in the northern districts of the capital."
)


@pytest.fixture(autouse=True)
def one_margin(monkeypatch) -> None:
    """A handful of documents make no neighbourhood: the tests hold every language to the default
    margin and floor (the margin tests set their own)."""
    monkeypatch.setattr(semantic, "SKETCH_MARGIN", {})
    monkeypatch.setattr(semantic, "SKETCH_MIN", {})


def batch_of(texts: list[str], prefix: str, hour: int = 0) -> pa.Table:
    return prepared_batch(texts, prefix, hour, site=True)


def config(**kw) -> DedupConfig:
    kw.setdefault("semantic_sketch", True)
    kw.setdefault("semantic_sketch_threshold_en", None)
    # The trigram fake scores a rewrite ~0.6 and unrelated text ~0.2: its own threshold.
    return DedupConfig(embedder="fake", semantic_threshold=0.5, semantic_threshold_en=0.5, **kw)


def shingle_jaccard(a: str, b: str, n: int = 3) -> float:
    def grams(t: str) -> set[tuple[str, ...]]:
        w = t.lower().replace(",", " ").replace(".", " ").split()
        return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}

    x, y = grams(a), grams(b)
    return len(x & y) / len(x | y)


def test_sketch_scores_a_rewrite_above_unrelated_text() -> None:
    assert shingle_jaccard(STORY, REWRITE) < 0.2  # far below any L3 near miss: only the sketch can find it
    sk = story_sketches(batch_of([STORY, REWRITE, UNRELATED, OTHER], "s"))
    assert sk.shape == (4, SKETCH_DIM) and np.allclose(np.linalg.norm(sk, axis=1), 1.0, atol=1e-5)
    # Four documents make a poor IDF (real batches have thousands); the order is what matters.
    assert sk[0] @ sk[1] > 0.4
    assert max(sk[0] @ sk[2], sk[0] @ sk[3], sk[1] @ sk[2], sk[1] @ sk[3]) < 0.2


def test_sketch_of_a_row_without_text_is_zero() -> None:
    sk = story_sketches(batch_of([STORY, ""], "e"))
    assert not sk[1].any()


# Two Chinese sentences, and the same two the other way round: the same words, but the character
# bigram across the join differs.
ZH_A = "上海市政府今天宣布了新的公共交通计划。地铁票价明年将下调百分之十。"
ZH_B = "地铁票价明年将下调百分之十。上海市政府今天宣布了新的公共交通计划。"
ZH_OTHER = "一种被认为已经灭绝的兰花在国家公园的悬崖上被发现。"


def test_chinese_sketches_count_words_or_character_bigrams() -> None:
    zh = prepared_batch([ZH_A, ZH_B, ZH_OTHER], "z", site=True, lang="zh")
    words, bigrams = story_sketches(zh, zh_features="jieba"), story_sketches(zh, zh_features="char2")
    assert words[0] @ words[1] == pytest.approx(1.0, abs=1e-5)  # one bag of words
    assert bigrams[0] @ bigrams[1] < 0.999
    assert words[0] @ words[2] < 0.3
    with pytest.raises(ValueError, match="zh_features"):
        story_sketches(zh, zh_features="pinyin")


def test_candidates_come_from_earlier_rows_and_earlier_batches_without_near_misses(monkeypatch) -> None:
    registry = MemoryRegistry()
    cfg = DedupConfig()
    store = store_for(registry)
    layer = SemanticLayer(cfg)
    b0 = batch_of([STORY, UNRELATED], "a")
    store.put(sketch_model_id(), np.array(["a0", "a1"], object), np.array([B0, B0], object), story_sketches(b0))
    b1 = batch_of([OTHER, REWRITE, REWRITE_2], "b", hour=1)
    rows, docs, batches, scores = layer.sketch_pairs(b1, LayerContext(B1, cfg, registry), store, story_sketches(b1))
    pairs = {(int(r), str(d), str(b)) for r, d, b in zip(rows, docs, batches, strict=True)}
    assert (1, "a0", B0) in pairs and (2, "a0", B0) in pairs  # both rewrites find the earlier story
    assert (2, "b1", B1) in pairs  # and the second finds the first, an earlier row of its batch
    assert not any(r == 0 for r, _, _ in pairs)  # the unrelated row has no candidate
    assert not any(d == "a1" for _, d, _ in pairs)
    assert (scores >= 0.3).all()
    # Never a later row of the batch, never a batch that is not earlier.
    assert all(b == B0 or int(d[1:]) < r for r, d, b in pairs)


def _unit(first: float, axis: int) -> np.ndarray:
    """A sketch at cosine ``first`` to the basis vector e0, the rest along e<axis>."""
    v = np.zeros(SKETCH_DIM, np.float32)
    v[0], v[axis] = first, np.sqrt(1.0 - first * first)
    return v


@pytest.mark.parametrize(
    ("others_cosine", "margin", "source_found"),
    [(0.05, 1.1, True), (0.48, 1.1, False), (0.48, 0.0, True)],
)
def test_a_candidate_must_stand_out_from_its_rows_neighbourhood(others_cosine, margin, source_found, monkeypatch) -> None:
    # The row sits at cosine 0.5 to its source, above the 0.3 floor either way; four other earlier
    # documents sit at others_cosine to it. Only where they are far does the source stand out.
    registry = MemoryRegistry()
    store = store_for(registry)
    prior = np.stack([_unit(0.5, 1)] + [_unit(others_cosine, 2 + i) for i in range(4)])
    store.put(sketch_model_id(), np.array(["src", "o0", "o1", "o2", "o3"], object), np.full(5, B0, object), prior)
    row = batch_of([OTHER], "b", hour=1)
    query = _unit(1.0, 1)[None, :]
    monkeypatch.setattr(semantic, "SKETCH_MARGIN", {"en": margin})
    cfg = DedupConfig()
    _, docs, _, scores = SemanticLayer(cfg).sketch_pairs(row, LayerContext(B1, cfg, registry), store, query)
    assert ("src" in set(docs)) is source_found
    assert np.all(scores >= 0.3)


@pytest.mark.parametrize(
    ("margins", "source_found"),
    [
        ((1.1, {}), False),
        ((1.1, {"en": 0.0}), True),  # the row's language: off
        ((0.0, {"en": 1.1}), False),
        ((1.1, {"zh": 0.0}), False),  # another language's
    ],
)
def test_a_language_margin_overrides_the_shared_margin(margins, source_found, monkeypatch) -> None:
    registry = MemoryRegistry()
    store = store_for(registry)
    prior = np.stack([_unit(0.5, 1)] + [_unit(0.48, 2 + i) for i in range(4)])
    store.put(sketch_model_id(), np.array(["src", "o0", "o1", "o2", "o3"], object), np.full(5, B0, object), prior)
    row = batch_of([OTHER], "b", hour=1)
    assert row.column("_lang").to_pylist() == ["en"]
    monkeypatch.setattr(semantic, "SKETCH_MARGIN_DEFAULT", margins[0])
    monkeypatch.setattr(semantic, "SKETCH_MARGIN", margins[1])
    cfg = DedupConfig()
    _, docs, _, _ = SemanticLayer(cfg).sketch_pairs(row, LayerContext(B1, cfg, registry), store, _unit(1.0, 1)[None, :])
    assert ("src" in set(docs)) is source_found


def test_neighbourhood_cosine_counts_missing_and_negative_neighbours_as_zero() -> None:
    cos = np.array([[0.9, 0.5, -np.inf, -np.inf], [0.6, -0.2, 0.2, 0.2]])
    assert np.allclose(neighbourhood_cosine(cos, 4), [0.35, 0.25])
    assert np.allclose(neighbourhood_cosine(cos[:, :2], 4), [0.35, 0.15])  # fewer found than asked


def test_rewrite_is_dropped_and_kept_sketches_are_stored_once(fake) -> None:
    registry = MemoryRegistry()
    cfg = config()
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    out = SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, registry))
    assert [(r["doc_id"], r["matched_doc_id"]) for r in out.drops.to_pylist()] == [("a2", "a0")]
    docs, batches, vectors = store_for(registry).scan(sketch_model_id())
    # Every kept document's sketch, none of the dropped rewrite.
    assert sorted(docs.tolist()) == ["a0", "a1"] and set(batches.tolist()) == {B0}
    assert out.stats.extra["sketch_pairs"] >= 1


def test_a_sentence_confirmed_pair_embeds_no_head(fake) -> None:
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    heads = b0.column("_near_text").to_pylist()
    fake.calls.clear()
    cfg = config(semantic_sketch_threshold_en=0.0)
    out = SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))
    assert [(r["doc_id"], r["matched_doc_id"]) for r in out.drops.to_pylist()] == [("a2", "a0")]
    # Only sentences were embedded: no head of the pair.
    assert fake.encoded and not set(heads) & set(fake.encoded) and out.stats.extra["embedded"] == 0

def test_second_hour_embeds_no_earlier_sentence_again(fake) -> None:
    from dedup_tasks.embed.aligned import sentences

    registry = MemoryRegistry()
    # Every aligned pair drops: the test is about what is embedded, not where the threshold sits.
    cfg = config(semantic_sketch_threshold_en=0.0)
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    out0 = SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, registry))
    assert [(r["doc_id"], r["matched_doc_id"]) for r in out0.drops.to_pylist()] == [("a2", "a0")]
    # Hour 00's kept rows, published where hour 01 reads an earlier candidate's text back.
    published = Path(cfg.root) / "deduped" / "dt=2026-12-01" / "hour=00"
    published.mkdir(parents=True)
    pq.write_table(b0.select(["doc_id", "url", "title", "content", "fetched_at", "lang", "site"]).take([0, 1]), published / "part-0.parquet")
    story = sentences(SemanticLayer(cfg)._sentence_texts(b0, np.arange(1))[0])
    assert set(story) <= set(fake.encoded) and out0.stats.extra["sentences_embedded"] >= len(story)
    fake.calls.clear()
    b1 = batch_of([OTHER, REWRITE_2], "b", hour=1)
    out1 = SemanticLayer(cfg).run(b1, LayerContext(B1, cfg, registry))
    assert [(r["doc_id"], r["matched_doc_id"], r["matched_batch_id"]) for r in out1.drops.to_pylist()] == [("b1", "a0", B0)]
    # Hour 00's story is read again as the candidate's text, but its sentence vectors come from the store.
    assert not set(story) & set(fake.encoded)
    newer = sentences(SemanticLayer(cfg)._sentence_texts(b1, np.arange(2))[1])
    assert set(newer) <= set(fake.encoded)
    assert out1.stats.extra["sentences_reused"] >= len(story) and out1.stats.extra["sentences_embedded"] == len(set(newer))


def test_the_next_hour_searches_the_saved_history_index_without_reading_the_store_back(fake, tmp_path) -> None:
    registry = MemoryRegistry()
    cfg = config(root=str(tmp_path / "root"))
    # Hour 00 stores its kept rows' sketches: hour 01 finds its rewrite's source through the saved index.
    SemanticLayer(cfg).run(batch_of([STORY, UNRELATED, REWRITE], "a"), LayerContext(B0, cfg, registry))
    store = store_for(registry)
    saved = PersistentIndex.open(cfg.root, sketch_model_id(), SKETCH_DIM)
    assert sorted(saved.doc_id.tolist()) == ["a0", "a1"] and saved.generation == store.generation(sketch_model_id())

    def no_snapshot(model_id: str):
        raise AssertionError("an hour read every stored sketch back")

    store.snapshot = no_snapshot  # type: ignore[method-assign]
    b1 = batch_of([OTHER, REWRITE_2], "b", hour=1)
    layer = SemanticLayer(cfg)
    rows, docs, _, _ = layer.sketch_pairs(b1, LayerContext(B1, cfg, registry), store, story_sketches(b1))
    assert (1, "a0") in {(int(r), str(d)) for r, d in zip(rows, docs, strict=True)}
    layer.run(b1, LayerContext(B1, cfg, registry))  # its candidate's text is not published: both rows kept
    saved = PersistentIndex.open(cfg.root, sketch_model_id(), SKETCH_DIM)
    assert sorted(saved.doc_id.tolist()) == ["a0", "a1", "b0", "b1"] and saved.generation == store.generation(sketch_model_id())


def test_sketch_candidates_are_on_by_default_and_can_be_turned_off(fake) -> None:
    assert DedupConfig().semantic_sketch is True
    registry = MemoryRegistry()
    cfg = config(semantic_sketch=False)
    out = SemanticLayer(cfg).run(batch_of([STORY, UNRELATED, REWRITE], "a"), LayerContext(B0, cfg, registry))
    assert out.drops.num_rows == 0 and fake.encoded == []


def test_the_pair_budget_reads_the_highest_sketch_cosines() -> None:
    open_pairs = np.array([True, True, False, True, True])
    sketch_cos = np.array([1.2, 1.5, 9.0, 1.5, 1.1])

    def unread(budget: int) -> list[int]:
        return SemanticLayer(DedupConfig(semantic_sketch_pair_budget=budget))._over_budget(open_pairs, sketch_cos).tolist()

    assert DedupConfig().semantic_sketch_pair_budget == 200
    assert unread(0) == [] and unread(4) == [] and unread(9) == []  # no cap, or within it
    # Two of the four open pairs: the two 1.5s (the closed pair's 9.0 is no candidate), the rest unread.
    assert unread(2) == [0, 4]
    assert unread(1) == [0, 3, 4]  # a tie goes to the earlier pair
    with pytest.raises(ConfigError, match="semantic_sketch_pair_budget"):
        DedupConfig(semantic_sketch_pair_budget=-1)


def test_pairs_over_the_budget_are_not_confirmed_and_their_rows_say_so(fake, caplog) -> None:
    cfg = config()
    b0 = batch_of([STORY, UNRELATED, REWRITE, REWRITE_2], "a")
    rows, _, _, cos = SemanticLayer(cfg).sketch_pairs(
        b0, LayerContext(B0, cfg, MemoryRegistry()), store_for(MemoryRegistry()), story_sketches(b0))
    assert set(rows.tolist()) == {2, 3} and len(rows) >= 2  # both rewrites have candidates

    def run(budget: int):
        budgeted = cfg.replace(semantic_sketch_pair_budget=budget)
        return SemanticLayer(budgeted).run(b0, LayerContext(B0, budgeted, MemoryRegistry()))

    with caplog.at_level(logging.WARNING, logger="dedup_tasks.layers.semantic"):
        whole = run(0)
    assert sorted(whole.drops.column("doc_id").to_pylist()) == ["a2", "a3"]
    assert "sketch_pairs_over_budget" not in whole.stats.extra
    assert "budget" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="dedup_tasks.layers.semantic"):
        one = run(1)
    # The task's log says the budget bit, and by how much.
    assert f"{len(rows) - 1} rewrite candidate pairs over the batch's budget of 1" in caplog.text
    assert "1 rows kept unread" in caplog.text
    # Only the pair of the highest sketch cosine is read: its row is dropped, the other rewrite is kept unread.
    first = int(rows[np.argmax(cos)])
    assert one.drops.column("doc_id").to_pylist() == [f"a{first}"]
    assert one.stats.extra["sketch_pairs_over_budget"] == len(rows) - 1
    assert one.stats.extra["rows_unread_over_budget"] == 1
    notes = dict(zip(one.survivors.column("doc_id").to_pylist(), one.survivors.column("_reason").to_pylist(), strict=True))
    assert "over the batch's budget of 1 sketch pairs" in notes[f"a{5 - first}"]
    assert notes["a0"] is None and notes["a1"] is None  # rows with no candidate left unread


def test_device_auto_is_cpu_without_cuda() -> None:
    torch = pytest.importorskip("torch")
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


def test_sentence_transformers_runs_on_cuda_when_present() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    from dedup_tasks.embed.embedders import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(device="auto")
    assert embedder.device == "cuda"
    assert str(next(embedder._model.parameters()).device).startswith("cuda")
    vectors = embedder.encode([STORY, REWRITE])
    assert vectors.shape == (2, embedder.dim)


def test_aligned_confirmation_scores_sketch_pairs_by_their_sentences(fake) -> None:
    from dedup_tasks.embed.aligned import aligned_scores, sentences

    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    near = b0.column("_near_text").to_pylist()
    # Sentences are cut from the punctuated lines, not from the folded view (which has no sentence end).
    texts = SemanticLayer(config())._sentence_texts(b0, np.arange(3))
    assert sentences(texts[2])[0] == REWRITE.split(". ")[0] + "."
    assert not any(s.endswith(".") for s in sentences(near[2]))
    # The pipeline hands the layers doc_id and private columns only: the text comes from ctx.inputs.
    from dedup_tasks.pipeline import layer_view

    ctx = LayerContext(B0, config(), MemoryRegistry(), inputs=b0.select(["title", "content"]))
    assert SemanticLayer(config())._sentence_texts(layer_view(b0), np.arange(3), ctx) == texts
    expected = float(aligned_scores(FakeEmbedder().encode, [texts[2]], [texts[0]])[0])
    head = FakeEmbedder().encode([near[2], near[0]])
    assert abs(expected - float(head[0] @ head[1])) > 0.01  # the two scores differ: the test can tell them apart

    def run(threshold: float):
        cfg = config(semantic_sketch_threshold_en=threshold)
        return SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))

    out = run(expected - 1e-4)
    drops = out.drops.to_pylist()
    assert [(r["doc_id"], r["matched_doc_id"]) for r in drops] == [("a2", "a0")]
    assert abs(drops[0]["score"] - expected) < 1e-5 and out.stats.extra["aligned_pairs"] >= 1
    assert run(expected + 1e-4).drops.num_rows == 0


def test_cross_confirmation_scores_sketch_pairs_by_the_cross_encoder_in_logits(fake, tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from dedup_tasks.embed.aligned import sentences

    model = write_cross_encoder(tmp_path / "flat.pt", bias=1.5)  # every sentence pair: logit 1.5
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    newer = sentences(SemanticLayer(config())._sentence_texts(b0, np.arange(3))[2])
    assert len(newer) == 2

    def run(threshold: float):
        monkeypatch.setattr(semantic, "CROSS_MIN_COS", -1.0)
        cfg = config(semantic_cross_encoder_en=str(model), semantic_cross_threshold_en=threshold)
        return SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))

    out = run(1.4)
    drops = out.drops.to_pylist()
    assert [(r["doc_id"], r["matched_doc_id"]) for r in drops] == [("a2", "a0")]
    drop = drops[0]
    # A logit is on no cosine's scale: the row says so, and holds the logit threshold it passed.
    assert drop["score_kind"] == "cross_logit"
    assert drop["score"] == pytest.approx(1.5, abs=1e-5) and drop["threshold"] == pytest.approx(1.4)
    assert drop["reason"].startswith("cross-encoder logit 1.50 >= 1.40 over 2 aligned sentences (model cross-e5-")
    assert drop["reason"].endswith(f") to doc a0 of batch {B0}")
    assert out.stats.extra["cross_pairs"] >= 1 and out.stats.extra["cross_models"]["en"].startswith("cross-e5-")
    assert out.stats.extra["cross_pairs_en"] == out.stats.extra["cross_pairs"] and out.stats.extra["cross_seconds_en"] >= 0
    assert run(1.6).drops.num_rows == 0


def test_prob_cos_confirmation_reads_the_mean_of_probability_and_aligned_cosine(fake, tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from dedup_tasks.embed.aligned import aligned_pairs

    model = write_cross_encoder(tmp_path / "flat.pt", bias=1.5)  # every sentence pair: logit 1.5
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    texts = SemanticLayer(config())._sentence_texts(b0, np.arange(3))
    cos = np.array([p[3] for p in aligned_pairs(FakeEmbedder().encode, [texts[2]], [texts[0]])])
    expected = float(np.mean(0.5 * (1.0 / (1.0 + np.exp(-1.5)) + cos)))
    assert abs(expected - 1.5) > 0.5 and abs(expected - 0.5 * (1.0 / (1.0 + np.exp(-1.5)) + 1.0)) > 1e-3

    def run(threshold: float):
        monkeypatch.setattr(semantic, "CROSS_SCORE", "prob_cos")
        monkeypatch.setattr(semantic, "CROSS_MIN_COS", -1.0)
        cfg = config(semantic_cross_encoder_en=str(model), semantic_cross_threshold_en=threshold)
        return SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))

    drops = run(expected - 1e-4).drops.to_pylist()
    assert [(r["doc_id"], r["matched_doc_id"]) for r in drops] == [("a2", "a0")]
    drop = drops[0]
    assert drop["score_kind"] == "cross_prob_cos"
    assert drop["score"] == pytest.approx(expected, abs=1e-5)
    assert drop["reason"].startswith(f"cross-encoder probability and cosine {expected:.2f} >= ")
    assert run(expected + 1e-4).drops.num_rows == 0


def test_a_pair_whose_aligned_cosine_is_below_the_gate_is_never_read_by_the_cross_encoder(fake, tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from dedup_tasks.embed.aligned import aligned_pairs

    model = write_cross_encoder(tmp_path / "pass-all.pt", bias=9.0)
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    texts = SemanticLayer(config())._sentence_texts(b0, np.arange(3))
    mean_cos = float(np.mean([p[3] for p in aligned_pairs(FakeEmbedder().encode, [texts[2]], [texts[0]])]))

    def run(gate: float):
        monkeypatch.setattr(semantic, "CROSS_MIN_COS", gate)
        cfg = config(semantic_cross_encoder_en=str(model), semantic_cross_threshold_en=1.0)
        return SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))

    below = run(mean_cos + 1e-4)  # a model that passes anything is not asked
    assert below.drops.num_rows == 0
    assert below.stats.extra["cross_gated"] >= 1 and below.stats.extra["cross_sentence_pairs"] == 0
    assert below.stats.extra["cross_reads"] == 0
    at = run(mean_cos - 1e-4)
    assert [(r["doc_id"], r["matched_doc_id"]) for r in at.drops.to_pylist()] == [("a2", "a0")]
    assert at.stats.extra["cross_gated"] == 0 and at.stats.extra["cross_sentence_pairs"] >= 2
    # A story above its threshold is read whole, both ways round.
    assert at.stats.extra["cross_reads"] == 2 * at.stats.extra["cross_sentence_pairs"]
    assert at.stats.extra["cross_partial"] == 0


def test_a_language_without_a_cross_encoder_keeps_the_aligned_cosine(fake, tmp_path) -> None:
    pytest.importorskip("torch")
    from dedup_tasks.embed.aligned import aligned_scores

    # A zh model that would pass every pair must not judge an English pair.
    model = write_cross_encoder(tmp_path / "zh.pt", bias=9.0)
    b0 = batch_of([STORY, UNRELATED, REWRITE], "a")
    texts = SemanticLayer(config())._sentence_texts(b0, np.arange(3))
    expected = float(aligned_scores(FakeEmbedder().encode, [texts[2]], [texts[0]])[0])

    def run(threshold: float):
        cfg = config(semantic_sketch_threshold_en=threshold,
                     semantic_cross_encoder_zh=str(model), semantic_cross_threshold_zh=-5.0)
        return SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))

    drops = run(expected - 1e-4).drops.to_pylist()
    assert [(r["doc_id"], r["score_kind"]) for r in drops] == [("a2", "cosine")]
    assert abs(drops[0]["score"] - expected) < 1e-5 and drops[0]["reason"].startswith("cosine ")
    assert run(expected + 1e-4).drops.num_rows == 0


# The same story's wording, another report's figures (9 percent, 25 million): no frame of STORY's survives.
OTHER_REPORT = REWRITE.replace("14 percent", "9 percent").replace("40 million", "25 million")


def test_a_rewrite_candidate_stating_other_values_is_refused_before_anything_is_embedded(fake, tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    model = write_cross_encoder(tmp_path / "pass-all.pt", bias=9.0)
    b0 = batch_of([STORY, UNRELATED, OTHER_REPORT], "a")

    def run(min_new: int):
        monkeypatch.setattr(semantic, "SKETCH_FACTS_MIN_NEW", min_new)
        monkeypatch.setattr(semantic, "CROSS_MIN_COS", -1.0)
        cfg = config(semantic_cross_encoder_en=str(model), semantic_cross_threshold_en=1.0)
        return SemanticLayer(cfg).run(b0, LayerContext(B0, cfg, MemoryRegistry()))

    fake.calls.clear()
    out = run(2)
    assert out.drops.num_rows == 0 and out.stats.extra["vetoed_values"] == 1
    assert fake.encoded == []  # settled before the model: nothing embedded
    # The frame rule alone lets the pair through, to a model that passes anything.
    assert run(0).drops.to_pylist()[0]["doc_id"] == "a2"


def templated_site_batch(bodies: list[str]) -> pa.Table:
    """Pages of one site, each body between the site's menu line and copyright line."""
    n = len(bodies)
    return prepare(pa.table({
        "doc_id": [f"t{i}" for i in range(n)],
        "url": [f"https://news.example/story-{i}" for i in range(n)],
        "title": [None] * n,
        "content": [f"Home | World | Business | Technology | Sport\n{b}\nCopyright 2026 News Example Ltd. All rights reserved." for b in bodies],
        "fetched_at": pa.array([datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "lang": ["en"] * n,
    }), DedupConfig())


def test_the_story_length_reads_the_story_not_the_site_template_around_it(fake) -> None:
    # A headline under a site's menu and footer: the near-duplicate view gives a page that is mostly
    # template its template back (70+ characters), the story itself is 30.
    batch = templated_site_batch([STORY, REWRITE, UNRELATED, OTHER, "Northwind shares fall 14 percent"])
    cfg = config()
    view = text_lengths(batch)
    story = SemanticLayer(cfg)._story_lengths_of(batch, LayerContext(B0, cfg, MemoryRegistry()), np.arange(5))
    assert view[4] >= 60 > story[4] == len("northwind shares fall 14 percent")
    assert (story[:4] == view[:4]).all() and (story[:4] >= 150).all()  # where the view lost its template, the two agree


def test_a_short_rewrite_candidate_stating_one_other_value_is_refused(fake) -> None:
    # Two flashes of one template: the same words, one other figure. A long story may add a value (a
    # rewrite adds a date); a flash is all facts.
    # (The planted crawl's pair: the frame rule sees no figure changed in place, the aligned score is 0.96.)
    first = "Robot vacuum (black) now $231.46. Ships from Chicago in 7 days."
    other = "Robot vacuum (white) now $923.05. Ships from Raleigh in 7 days."
    same = "Robot vacuum in black, now $231.46. It ships from Chicago in 7 days."
    assert len(first) < semantic.SHORT_STORY_CHARS
    cfg = config(semantic_sketch_threshold_en=0.0)
    out = SemanticLayer(cfg).run(batch_of([first, other], "s"), LayerContext(B0, cfg, MemoryRegistry()))
    assert out.drops.num_rows == 0 and out.stats.extra["vetoed_values"] == 1
    kept = SemanticLayer(cfg).run(batch_of([first, same], "t"), LayerContext(B0, cfg, MemoryRegistry()))
    assert [(r["doc_id"], r["matched_doc_id"]) for r in kept.drops.to_pylist()] == [("t1", "t0")]

def test_the_decision_of_a_row_left_unread_by_the_budget_says_so(fake) -> None:
    b0 = batch_of([STORY, UNRELATED, REWRITE, REWRITE_2], "a")
    raw = b0.select(["doc_id", "url", "title", "content", "fetched_at", "lang", "site"])
    cfg = config(semantic_sketch_pair_budget=1, layers=("url", "exact", "simhash", "minhash", "semantic"))
    registry = MemoryRegistry()
    decisions = run_batch(raw, B0, cfg, registry).decisions.to_pylist()
    by_doc = {d["doc_id"]: d for d in decisions}
    assert len(decisions) == 4  # one decision a row
    unread = [d for d in decisions if d["reason"] and "over the batch's budget of 1" in d["reason"]]
    assert len(unread) == 1 and unread[0]["action"] == "keep"
    other_rewrite = ({"a2", "a3"} - {unread[0]["doc_id"]}).pop()
    assert [d["doc_id"] for d in decisions if d["action"] == "drop"] == [other_rewrite]
    assert by_doc["a0"]["reason"] is None
    # What the note advises: the hour run again with a larger budget judges the unread row too.
    again = run_batch(raw, B0, cfg.replace(semantic_sketch_pair_budget=0), registry).decisions.to_pylist()
    assert sorted(d["doc_id"] for d in again if d["action"] == "drop") == ["a2", "a3"]
    assert not any(d["reason"] and "budget" in d["reason"] for d in again)
