"""Why L4's rewrite candidates and confirmer are what they are: ``python -m bench.research.rewrite_probe``.

Reads the planted dev crawl that ``python -m bench semantic --size tiny --reworded dev`` builds
(dev only: no threshold or setting is read on test) and, over every document of its two hours:

* ``candidates``: for each planted rewrite (and same-topic page), whether its source is among its 2
  nearest earlier story sketches, at each margin over the mean cosine of its 4 nearest sketches and
  each floor; how many pairs other documents open there. ``--static`` adds a static embedding
  distilled from multilingual-e5-small (every vocabulary token through the model alone, PCA to 256,
  SIF weights from the tokenizer's unigram scores; a Model2Vec-style table, about 5 CPU-minutes).
* ``scores``: for the candidate pairs (rewrites, same-topic pages, and other documents' pairs at
  margin 1.1), variants of the sentence-aligned e5 score and the recall of rewrites each gives at the
  tail rule (no same-topic or other pair above).

Prints its tables; writes nothing.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from bench.harness import WORK, hour_ids

DUPLICATES_L1_L3 = ("near_copy", "exact_copy", "url_repeat", "corpus_dup")


def documents(split: str = "dev") -> tuple[pd.DataFrame, np.ndarray]:
    """Every document of the planted crawl, prepared as a batch prepares it, with its 1,024-bucket sketch."""
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.embed.aligned import punctuated_text
    from dedup_tasks.embed.sketch import story_sketches
    from dedup_tasks.io import BatchPaths, read_input
    from dedup_tasks.pipeline import prepare

    root = WORK / f"crawl-2000x2-seed0-reworded-{split}"
    if not root.exists():
        raise SystemExit(f"{root} not found: run python -m bench semantic --size tiny --reworded {split} first")
    truth = pd.read_parquet(root / "truth.parquet")
    cfg = DedupConfig(root=str(WORK / "rewrite-probe"))
    frames, sketches = [], []
    for h, b in enumerate(hour_ids(root)):
        table, _ = read_input(BatchPaths(root, b).input)
        p = prepare(table, cfg)
        d = p.select(["doc_id", "title", "content", "_near_text", "_lang"]).to_pandas()
        text = lambda v: v if isinstance(v, str) else None  # noqa: E731
        d["punct"] = [punctuated_text(text(t), text(c), text(v), 2000) for t, c, v in zip(d.title, d.content, d._near_text, strict=True)]
        d["hour"], d["pos"] = h, np.arange(len(d))
        sketches.append(story_sketches(p, None))
        frames.append(d)
    d = pd.concat(frames, ignore_index=True).merge(truth[["doc_id", "kind"]], on="doc_id", how="left")
    return d, np.concatenate(sketches)


def static_vectors(d: pd.DataFrame) -> np.ndarray:
    """The distilled static embedding of each document's near-duplicate view (centred token table,
    PCA 256, SIF weights a / (a + p) with p the unigram probability, a = 1e-4)."""
    from dedup_tasks.embed.e5_torch import E5File, E5Tokenizer, E5Torch

    model = E5Torch(threads=1)
    n = len(model.tokenizer._tok.get_vocab())
    table = np.zeros((n, model.H), np.float32)
    for start in range(0, n, 16384):
        ids = [[model.tokenizer.bos, i, model.tokenizer.eos] for i in range(start, min(n, start + 16384))]
        table[start : start + len(ids)] = model.pooled_ids(ids, batch_tokens=3 * 4096)
    table -= table[4:].mean(axis=0)
    _, vecs = np.linalg.eigh(table[4:].T @ table[4:])
    table = table @ vecs[:, ::-1][:, :256]
    f = E5File()
    tok = E5Tokenizer(f)
    weight = (1e-4 / (1e-4 + np.exp(f.scores))).astype(np.float32)
    weight[:4] = 0
    texts = [t if isinstance(t, str) else "" for t in d._near_text]
    out = np.zeros((len(texts), table.shape[1]), np.float32)
    for i, enc in enumerate(tok._tok.encode_batch([tok._prep(t) for t in texts], add_special_tokens=False)):
        if enc.ids:
            ids = np.array(enc.ids)
            out[i] = (table[ids] * weight[ids, None]).sum(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.where(norms > 0, out / np.maximum(norms, 1e-9), 0).astype(np.float32)


def neighbourhood(d: pd.DataFrame, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(cosine to every earlier document, mean of each row's 4 nearest cosines, doc_id -> row)."""
    n = len(d)
    order = np.lexsort((d.pos.values, d.hour.values))
    rank = np.empty(n, int)
    rank[order] = np.arange(n)
    sim = vectors @ vectors.T
    np.fill_diagonal(sim, -np.inf)
    sim[:, np.abs(vectors).sum(axis=1) == 0] = -np.inf
    around = np.sort(np.where(np.isfinite(sim), np.maximum(sim, 0), 0), axis=1)[:, -4:].mean(axis=1)
    earlier = np.where(rank[None, :] < rank[:, None], sim, -np.inf)
    return earlier, around, {x: i for i, x in enumerate(d.doc_id)}


def candidates(d: pd.DataFrame, vectors: np.ndarray, name: str) -> None:
    sim, around, row = neighbourhood(d, vectors)
    top2 = np.argsort(-sim, axis=1)[:, :2]
    other = ~d.kind.isin(DUPLICATES_L1_L3).values & ~d.doc_id.str.startswith("rw-").values
    for lang in ("en", "zh"):
        for kind in ("reworded", "same_topic"):
            g = d[(d.kind == kind) & (d._lang == lang)]
            q = g.index.values
            src = np.array([row[x[:-1] + "a"] for x in g.doc_id])
            cos = sim[q, src]
            rank = (sim[q] > cos[:, None]).sum(axis=1)
            print(f"{name} {lang} {kind}: source first {np.mean(rank == 0):.3f}, in top 2 {np.mean(rank < 2):.3f}, "
                  f"cosine median {np.median(cos):.3f}")
            if kind == "reworded":
                for margin in (1.1, 1.3, 1.5):
                    for floor in (0.3, 0.5):
                        hit = (rank < 2) & (cos >= floor) & (cos >= margin * around[q])
                        pairs = sum(int(((sim[np.arange(len(d)), top2[:, r]] >= np.maximum(floor, margin * around))
                                         & other & (d._lang.values == lang)).sum()) for r in range(2))
                        print(f"    margin {margin} floor {floor}: rewrites {hit.mean():.3f}, other documents' pairs {pairs}")


def scores(d: pd.DataFrame, sketches: np.ndarray) -> None:
    from dedup_tasks.embed.aligned import sentences
    from dedup_tasks.embed.e5_torch import E5Torch

    sim, around, row = neighbourhood(d, sketches)
    pairs = [(i, row[d.doc_id[i][:-1] + "a"], d.kind[i]) for i in d.index[d.kind.isin(["reworded", "same_topic"])]]
    other = d.index[~d.kind.isin(DUPLICATES_L1_L3 + ("reworded", "same_topic", "url_update", "list_page", "short_distinct"))
                    & ~d.doc_id.str.startswith("rw-")]
    for i in other:
        for j in np.argsort(-sim[i])[:2]:
            if np.isfinite(sim[i, j]) and sim[i, j] >= 1.1 * around[i]:
                pairs.append((i, j, "other"))
    split = {i: sentences(d.punct[i]) for p in pairs for i in p[:2]}
    texts = sorted({s for v in split.values() for s in v})
    vec = dict(zip(texts, E5Torch(threads=1, workers=2).embed(texts, 128), strict=True))
    rows = []
    for i, j, kind in pairs:
        a, b = split[i], split[j]
        if not a or not b:
            continue
        m = np.array([vec[s] for s in a]) @ np.array([vec[s] for s in b]).T
        short = m if len(a) <= len(b) else m.T
        best = short.max(axis=1)
        rows.append({"lang": d._lang[i], "kind": kind, "newer side mean": m.max(axis=1).mean(), "shorter side mean": best.mean(),
                     "shorter side min": best.min(), "shorter side 25%": np.quantile(best, 0.25), "sketch": sim[i, j]})
    r = pd.DataFrame(rows)
    r["shorter side mean + 0.05 sketch"] = r["shorter side mean"] + 0.05 * r["sketch"]
    for lang, g in r.groupby("lang"):
        pos, neg = g[g.kind == "reworded"], g[g.kind != "reworded"]
        for col in [c for c in r.columns if c not in ("lang", "kind", "sketch")]:
            tail = neg[col].max()
            print(f"{lang} {col}: recall of the rewrites scored {np.mean(pos[col] > tail):.3f} above the tail {tail:.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.research.rewrite_probe")
    parser.add_argument("what", choices=["candidates", "scores"])
    parser.add_argument("--static", action="store_true", help="also the distilled static e5 embedding (candidates)")
    args = parser.parse_args(argv)
    d, sketches = documents("dev")
    if args.what == "candidates":
        candidates(d, sketches, "sketch-1024")
        if args.static:
            candidates(d, static_vectors(d), "static-e5")
    else:
        scores(d, sketches)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
