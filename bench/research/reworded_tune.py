"""Tuning table of the reworded kind: ``python -m bench.research.reworded_tune dev|test [embedder max_tokens pairs]``.

``python -m bench.research.reworded_tune dev aligned [pairs]`` compares e5's head cosine with the sentence-aligned
score (``dedup_tasks.embed.aligned``) on the same pairs. ``python -m bench.research.reworded_tune dev static`` instead measures a static-embedding candidate stage: the
TF-IDF-weighted mean of e5's input token embeddings (its tokenizer and 4-bit embedding matrix, no
transformer layer), centred and normalized over the stories, against the story sketch.

Per language, on up to 600 stories of the split (``bench.reworded``): the story-sketch cosine of each
source/other pair (rewrites vs same-topic negatives), the share each ``semantic_sketch_min`` lets
through, and, with an embedder, the transformer cosine of the first ``pairs`` pairs at each threshold.
Prints only; tune on ``dev``, run ``test`` once to report.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pyarrow as pa


def main(argv: list[str]) -> None:
    from bench.reworded import stories
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.embed.sketch import story_sketches
    from dedup_tasks.pipeline import prepare

    split = argv[0]
    emb = argv[1] if len(argv) > 1 else None
    for lang, items in stories(split).items():
        items = items[:600]
        n = len(items)
        texts = [s.source for s in items] + [s.other for s in items]
        t = pa.table({
            "doc_id": [f"d{i}" for i in range(2 * n)], "url": [f"https://x{i}.example/a" for i in range(2 * n)],
            "title": [""] * (2 * n), "content": texts,
            "fetched_at": pa.array(np.arange(2 * n) * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "lang": [lang] * (2 * n), "site": [f"x{i}.example" for i in range(2 * n)],
        })
        p = prepare(t, DedupConfig())
        cpu = time.process_time()
        sk = story_sketches(p)
        per_doc = (time.process_time() - cpu) / (2 * n)
        cos = (sk[:n] * sk[n:]).sum(1)
        dup = np.array([s.duplicate for s in items])
        print(lang, n, f"sketch cpu/doc {per_doc * 1e6:.0f} us", "pos q10/50", np.quantile(cos[dup], [0.1, 0.5]).round(3),
              "neg q50/90", np.quantile(cos[~dup], [0.5, 0.9]).round(3),
              "top-1 is its pair: rewrites", ((sk[n:] @ sk[:n].T).argmax(1) == np.arange(n))[dup].mean().round(3))
        for m in (0.3, 0.4, 0.5, 0.6):
            print("  sketch_min", m, "rewrites through", (cos[dup] >= m).mean().round(3), "negatives through", (cos[~dup] >= m).mean().round(3))
        if emb == "static":
            _static(texts, dup, n)
            continue
        if emb == "aligned":
            _aligned(texts, dup, n, int(argv[2]) if len(argv) > 2 else 120)
            continue
        if emb == "trained":
            _trained(lang, texts, dup, n, int(argv[2]) if len(argv) > 2 else 600, argv[3] if len(argv) > 3 else None,
                     [s.dataset for s in items])
            continue
        if not emb:
            continue
        from dedup_tasks.embed.embedders import get_embedder

        e = get_embedder(emb, max_tokens=int(argv[2]), threads=0)
        k = min(n, int(argv[3]) if len(argv) > 3 else 120)
        started = time.perf_counter()
        a, b = e.encode(texts[:k]), e.encode(texts[n : n + k])
        wall = time.perf_counter() - started
        c, d = (a * b).sum(1), dup[:k]
        print("  ", emb, f"{2 * k / wall:.1f} texts/s", "pos q05/10/50", np.quantile(c[d], [0.05, 0.1, 0.5]).round(3),
              "neg q50/90/99", np.quantile(c[~d], [0.5, 0.9, 0.99]).round(3))
        for th in (0.9, 0.92, 0.94, 0.95, 0.96, 0.975):
            tp, fp = int((c[d] >= th).sum()), int((c[~d] >= th).sum())
            print("    threshold", th, "recall", round(tp / d.sum(), 3), "precision", round(tp / max(tp + fp, 1), 3),
                  "negatives dropped", round(fp / (~d).sum(), 3))


def _aligned(texts: list[str], dup: np.ndarray, n: int, k: int) -> None:
    """Head cosine (e5, 128 tokens) against the sentence-aligned score (``embed.aligned``) on k pairs."""
    from dedup_tasks.embed.aligned import aligned_scores, sentences
    from dedup_tasks.embed.embedders import get_embedder

    k = min(n, k)
    head = get_embedder("e5", max_tokens=128, threads=0)
    short = get_embedder("e5", max_tokens=64, threads=0)
    cpu = time.process_time()
    a, b = head.encode(texts[:k]), head.encode(texts[n : n + k])
    head_cpu = time.process_time() - cpu
    c = (a * b).sum(1)
    cpu = time.process_time()
    al = aligned_scores(short.encode, texts[n : n + k], texts[:k])
    al_cpu = time.process_time() - cpu
    d = dup[:k]
    per = np.mean([len(sentences(t)) for t in texts[:k] + texts[n : n + k]])
    print(f"  {k} pairs: head cpu/doc {head_cpu / (2 * k) * 1e3:.0f} ms, aligned cpu/doc {al_cpu / (2 * k) * 1e3:.0f} ms, "
          f"{per:.1f} sentences/doc")
    for name, score, ths in (("head", c, (0.94, 0.95, 0.96, 0.97, 0.975, 0.98)),
                             ("aligned", al, (0.86, 0.88, 0.9, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96))):
        print("   ", name, "pos q10/50", np.quantile(score[d], [0.1, 0.5]).round(3), "neg q50/90/99",
              np.quantile(score[~d], [0.5, 0.9, 0.99]).round(3))
        for th in ths:
            tp, fp = int((score[d] >= th).sum()), int((score[~d] >= th).sum())
            print(f"      {th}: recall {tp / max(d.sum(), 1):.3f} precision {tp / max(tp + fp, 1):.3f} "
                  f"negatives through {fp / max((~d).sum(), 1):.3f}")


def _recall_at(score: np.ndarray, d: np.ndarray, precision: float) -> tuple[float, float]:
    """(best recall, its threshold) over thresholds whose precision on these pairs is >= ``precision``."""
    best = (0.0, float("nan"))
    for th in np.unique(score):
        tp, fp = int((score[d] >= th).sum()), int((score[~d] >= th).sum())
        if tp and tp / (tp + fp) >= precision and tp / d.sum() > best[0]:
            best = (tp / d.sum(), float(th))
    return best


def _trained(lang: str, texts: list[str], dup: np.ndarray, n: int, k: int, head_path: str | None, datasets: list[str]) -> None:
    """Head cosine (128 tokens), sentence-aligned cosine and the trained pair head (``embed.pair_head``,
    sentence-aligned) on the first k pairs: recall at precision 1.0 / 0.95, per score."""
    from bench.research.pair_head import PairHead, trained_scores
    from dedup_tasks.embed.aligned import aligned_scores
    from dedup_tasks.embed.embedders import E5TorchEmbedder

    k = min(n, k)
    # Two embedder objects: get_embedder shares one per name, and max_tokens is set on it.
    head, short = E5TorchEmbedder(max_tokens=128, threads=0), E5TorchEmbedder(max_tokens=64, threads=0)
    cpu = time.process_time()
    c = (head.encode(texts[:k]) * head.encode(texts[n : n + k])).sum(1)
    head_cpu = time.process_time() - cpu
    cpu = time.process_time()
    al = aligned_scores(short.encode, texts[n : n + k], texts[:k])
    al_cpu = time.process_time() - cpu
    pair_head = PairHead.load(head_path) if head_path else None
    cpu = time.process_time()
    tr = trained_scores(short.encode, texts[n : n + k], texts[:k], [lang] * k, pair_head)
    tr_cpu = time.process_time() - cpu
    d = dup[:k]
    print(f"  {k} pairs ({int(d.sum())} rewrites, {int((~d).sum())} negatives): cpu/doc head {head_cpu / (2 * k) * 1e3:.1f} ms, "
          f"aligned {al_cpu / (2 * k) * 1e3:.1f} ms, trained {tr_cpu / (2 * k) * 1e3:.1f} ms")
    ds = np.array(datasets[:k])
    for name, score in (("head cosine", c), ("aligned cosine", al), ("trained head", tr)):
        r1, t1 = _recall_at(score, d, 1.0)
        r95, t95 = _recall_at(score, d, 0.95)
        print(f"    {name:15s} pos q10/50 {np.quantile(score[d], [0.1, 0.5]).round(3)} neg q50/90/99 "
              f"{np.quantile(score[~d], [0.5, 0.9, 0.99]).round(3)}  recall@P1.0 {r1:.3f} (>= {t1:.3f})  recall@P0.95 {r95:.3f} (>= {t95:.3f})")
        for name_ds in sorted(set(ds.tolist())):
            m = ds == name_ds
            if d[m].any() and (~d[m]).any():
                print(f"      {name_ds:24s} {int(d[m].sum())}/{int((~d[m]).sum())} recall@P0.95 {_recall_at(score[m], d[m], 0.95)[0]:.3f}")


def _static(texts: list[str], dup: np.ndarray, n: int) -> None:
    from dedup_tasks.embed.e5_torch import E5File, E5Tokenizer, dequant_blocks

    f = E5File()
    tok, table = E5Tokenizer(f), f.tensors["emb.word"]
    cpu = time.process_time()
    ids = [np.asarray(b[1:-1]) for b in tok.encode(texts, 512)]
    df = np.zeros(f.VOC)
    for b in ids:
        df[np.unique(b)] += 1
    idf = np.log((len(ids) + 1) / (df + 1)) + 1
    vec = np.zeros((len(ids), f.H), np.float32)
    for i, b in enumerate(ids):
        u, c = np.unique(b, return_counts=True)
        vec[i] = ((1 + np.log(c)) * idf[u])[:, None].T @ dequant_blocks(table[u].reshape(-1), len(u), f.H)
    vec -= vec.mean(0)  # every text shares a common direction; without it all cosines are ~0.9
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    per_doc = (time.process_time() - cpu) / len(ids)
    cos = (vec[:n] * vec[n:]).sum(1)
    top1 = (vec[n:] @ vec[:n].T).argmax(1) == np.arange(n)
    print("  static e5", f"cpu/doc {per_doc * 1e6:.0f} us", "pos q10/50", np.quantile(cos[dup], [0.1, 0.5]).round(3),
          "neg q50/90", np.quantile(cos[~dup], [0.5, 0.9]).round(3), "top-1 is its pair: rewrites", top1[dup].mean().round(3))
    for m in (0.3, 0.4, 0.5, 0.6, 0.7):
        print("    static_min", m, "rewrites through", (cos[dup] >= m).mean().round(3), "negatives through", (cos[~dup] >= m).mean().round(3))


if __name__ == "__main__":
    main(sys.argv[1:])
