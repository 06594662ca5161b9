"""Train ``bench/work/research/pair_head.npz``: ``python -m bench.research.train_pair_head [out.npz]``.

Deterministic (fixed seeds, full-batch L-BFGS). Reads only *train* files of ``pairs/`` (found through
``DEDUP_EVAL_DATA``): English MRPC train (label 1 / 0) and STS-B train (>= 4 / <= 2), Chinese ATEC
train (1 / 0) and Chinese-STS-B train (>= 4 / <= 1), plus one random pairing of each file's sentences
per positive (a rewrite's sentence is scored against every sentence of the candidate, most of which
are unrelated). Pairs whose sentences appear in the dev stories the bench evaluates on (the first
``EVAL_STORIES`` of ``bench.reworded.stories("dev")`` and the first ``EVAL_EACH`` rewrites and
negatives of each language, which ``plant`` takes) are left out, so dev figures are on pairs the head
never saw. Sentences are embedded by e5 (torch, 64-token head, "query: " prefix) as the confirmer does.

The L2 strength is picked per language from (0.1, 1, 10, 100) by log loss on a fixed 10% of the
training pairs, then the head is refit on all of them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.evaldata import eval_data_dir
from bench.research.pair_head import HEAD_PATH, lexical_grid, pair_features
from bench.reworded import _rule, stories

TRAIN_FILES = {
    "en": [("en_mrpc_train.jsonl", "label==1", "label==0"), ("en_stsb_train.jsonl", "label>=4", "label<=2")],
    "zh": [("zh_atec_train.jsonl", "label==1", "label==0"), ("zh_chinese_sts_b_train.jsonl", "label>=4", "label<=1")],
}
# More pair files to train on (``--more-files``): the zh dev files the stories are cut from (their
# held-out stories still left out) and two zh dev files no story comes from. The test files never.
MORE_TRAIN_FILES = {
    "en": [],
    "zh": [("zh_lcqmc_dev.jsonl", "label==1", "label==0"), ("zh_bq_dev.jsonl", "label==1", "label==0"),
           ("zh_afqmc_dev.jsonl", "label==1", "label==0"), ("zh_oppo_xiaobu_dev.jsonl", "label==1", "label==0"),
           ("zh_pawsx_zh_dev.jsonl", "label==1", "label==0")],
}
EVAL_STORIES = 600
EVAL_EACH = 400
MAX_TOKENS = 64
SEED = 13


def held_out_text(lang: str, stories_only: bool = False) -> str:
    """Every dev story text the bench may evaluate on, joined: a pair inside it is not trained on.
    ``stories_only``: the first EVAL_STORIES only (what the cross-encoder probe and the planted crawl,
    up to 240 rewrites and 240 negatives, evaluate on), not the pair head's EVAL_EACH per class."""
    items = stories("dev")[lang]
    used = list(items[:EVAL_STORIES])
    if not stories_only:
        used += [s for s in items if s.duplicate][:EVAL_EACH] + [s for s in items if not s.duplicate][:EVAL_EACH]
    return "\n".join(t for s in used for t in (s.source, s.other))


def training_pairs(
    lang: str, random_pairs: bool = True, stories_only: bool = False, more_files: bool = False
) -> tuple[list[str], list[str], np.ndarray, dict]:
    rng = np.random.default_rng(SEED)
    held = held_out_text(lang, stories_only)
    a, b, y, counts = [], [], [], {}
    for name, pos, neg in TRAIN_FILES[lang] + (MORE_TRAIN_FILES[lang] if more_files else []):
        rows = [json.loads(line) for line in (eval_data_dir() / "pairs" / name).open(encoding="utf-8")]
        rows = [r for r in rows if r.get("text1") and r.get("text2")]
        kept = [r for r in rows if r["text1"].strip() not in held and r["text2"].strip() not in held]
        p = [r for r in kept if _rule(pos, float(r["label"]))]
        n = [r for r in kept if _rule(neg, float(r["label"]))]
        perm = rng.permutation(len(kept))
        rnd = [(kept[i]["text1"], kept[j]["text2"]) for i, j in zip(range(len(kept)), perm, strict=True) if i != j][: len(p)] if random_pairs else []
        for rs, label in ((p, 1), (n, 0)):
            a += [r["text1"].strip() for r in rs]
            b += [r["text2"].strip() for r in rs]
            y += [label] * len(rs)
        a += [x.strip() for x, _ in rnd]
        b += [x.strip() for _, x in rnd]
        y += [0] * len(rnd)
        counts[name] = {"rows": len(rows), "held_out": len(rows) - len(kept), "positives": len(p), "negatives": len(n), "random": len(rnd)}
    return a, b, np.array(y, np.float64), counts


def features(embed, a: list[str], b: list[str], lang: str) -> np.ndarray:
    index = {t: i for i, t in enumerate(dict.fromkeys(a + b))}
    vec = embed(list(index))
    u, v = vec[[index[t] for t in a]], vec[[index[t] for t in b]]
    lex = np.concatenate([lexical_grid([x], [z], lang)[0] for x, z in zip(a, b, strict=True)])
    return pair_features(u, v, lex).astype(np.float64)


def fit(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, float]:
    from scipy.optimize import minimize

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        z = x @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        ll = np.logaddexp(0, z) - y * z
        g = p - y
        return float(ll.mean() + 0.5 * l2 * (w @ w) / len(y)), np.concatenate([x.T @ g / len(y) + l2 * w / len(y), [g.mean()]])

    res = minimize(loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    return res.x[:-1], float(res.x[-1])


def auc(score: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(score, kind="stable")
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    pos = y == 1
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


def main(argv: list[str]) -> None:
    from dedup_tasks.embed.embedders import get_embedder

    out = Path(argv[0]) if argv else HEAD_PATH
    e5 = get_embedder("e5", max_tokens=MAX_TOKENS, threads=0)
    arrays: dict[str, np.ndarray] = {"langs": np.array(sorted(TRAIN_FILES))}
    report: dict = {}
    for lang in sorted(TRAIN_FILES):
        started = time.perf_counter()
        a, b, y, counts = training_pairs(lang)
        x = features(e5.encode, a, b, lang)
        mean, scale = x.mean(0), x.std(0) + 1e-6
        xs = (x - mean) / scale
        val = np.random.default_rng(SEED).random(len(y)) < 0.1
        best = None
        for l2 in (0.1, 1.0, 10.0, 100.0):
            w, c = fit(xs[~val], y[~val], l2)
            z = xs[val] @ w + c
            ll = float((np.logaddexp(0, z) - y[val] * z).mean())
            if best is None or ll < best[0]:
                best = (ll, l2, auc(z, y[val]), auc(x[val][:, 768], y[val]))
        w, c = fit(xs, y, best[1])
        arrays.update({f"{lang}_mean": mean.astype(np.float32), f"{lang}_scale": scale.astype(np.float32),
                       f"{lang}_w": w.astype(np.float32), f"{lang}_b": np.float32(c)})
        report[lang] = {"pairs": len(y), "files": counts, "l2": best[1], "val_log_loss": round(best[0], 4),
                        "val_auc_head": round(best[2], 4), "val_auc_cosine": round(best[3], 4),
                        "seconds": round(time.perf_counter() - started, 1)}
        print(lang, json.dumps(report[lang]), flush=True)
    arrays["meta_command"] = np.array("python -m bench.research.train_pair_head")
    arrays["meta_report"] = np.array(json.dumps(report, sort_keys=True))
    arrays["meta_encoder"] = np.array(f"e5 (dedup_tasks.embed.e5_torch), {MAX_TOKENS} tokens, query: prefix")
    np.savez_compressed(out, **arrays)
    print("wrote", out, out.stat().st_size, "bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
