"""Does e5-small fine-tuned as a cross-encoder confirm rewrites better than the aligned cosine? (docs/semantic.md)

    python -m bench.research.cross_probe [--lang en|zh] [--with-lang en|zh] [--steps 700] [--decay] [--no-random] [--hold-stories-only]
                                [--more-files] [--seed 0] [--save-model M.pt] [--save S.npz]
    python -m bench.research.cross_probe rescore M.pt en S.npz     # a saved model against today's sentence alignment
    python -m bench.research.cross_probe report S.npz              # the tables again, from the saved scores

Trains e5-small (``embed.e5_torch``) as a cross-encoder (``embed.cross_training.train``) on the train
pairs of ``bench.research.train_pair_head`` (the dev stories' sentences left out, with ``--hold-stories-only``
only those of the stories evaluated here; ``--no-random`` without its random pairings): each pair is read
as one sequence ``<s> A </s></s> B </s>`` (both orders, 64 tokens a side), its mean-pooled vector goes
through one linear unit, binary cross-entropy, every encoder weight trained (the token table stays
4-bit and frozen), 16 pairs a step, ~0.7 s a step on 2 cores. A story pair is then scored sentence by
sentence: each newer sentence is aligned to its nearest earlier sentence by the base model's cosine
(``embed.aligned``, as the layer's aligned score does), each aligned pair is scored both ways round,
and ``report`` pools them per story (mean probability, mean logit, min logit, probability + cosine)
beside the aligned cosine. Thresholds come from the first 600 dev stories only (the best recall at
precision 1.0, and a normal fitted to each dev dataset's negatives passing 0.5% of them) and are applied
once to the test stories. The model is written only where ``--save-model`` says (outside the product:
it is trained on research-only pairs).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def save_scores(cross, lang: str, path: str) -> None:
    """Every aligned sentence pair of the first 600 dev and test stories, scored both ways round by the
    cross-encoder (``embed.cross_encoder.CrossEncoder``), to ``path`` for ``report``; in English also the 1,725 MRPC
    test pairs as the file gives them (no stories, no alignment)."""
    import torch

    from bench.evaldata import eval_data_dir
    from bench.research.train_pair_head import EVAL_STORIES
    from bench.reworded import stories
    from dedup_tasks.embed.aligned import aligned_pairs
    from dedup_tasks.embed.e5_torch import E5Torch

    base = E5Torch(threads=2)  # alignment by the shipped weights, as the layer aligns
    saved = {}
    for split in ("dev", "test"):
        items = stories(split)[lang][:EVAL_STORIES]
        with torch.no_grad():
            prs = aligned_pairs(lambda t: base.embed(t, 64), [s.other for s in items], [s.source for s in items])
        saved[f"{split}_story"] = np.array([q[0] for q in prs])
        saved[f"{split}_cos"] = np.array([q[3] for q in prs])
        saved[f"{split}_ab"] = cross.one_way([q[1] for q in prs], [q[2] for q in prs])
        saved[f"{split}_ba"] = cross.one_way([q[2] for q in prs], [q[1] for q in prs])
        saved[f"{split}_dup"] = np.array([s.duplicate for s in items])
        saved[f"{split}_dataset"] = np.array([s.dataset for s in items])
    if lang == "en":
        mrpc = [json.loads(line) for line in (eval_data_dir() / "pairs" / "en_mrpc_test.jsonl").open(encoding="utf-8")]
        t1, t2 = [r["text1"].strip() for r in mrpc], [r["text2"].strip() for r in mrpc]
        saved["mrpc_test_logit"] = cross.logits(t1, t2)
        saved["mrpc_test_label"] = np.array([int(r["label"]) for r in mrpc])
    np.savez(path, **saved)
    print(f"saved {path}", flush=True)


def training_set(
    lang: str, with_lang: str = "", random_pairs: bool = True, stories_only: bool = False, more_files: bool = False
) -> tuple[list[str], list[str], np.ndarray]:
    """The training pairs of ``lang`` (``bench.research.train_pair_head.training_pairs``), then, for one
    multilingual model, those of ``with_lang`` (its own held-out dev stories left out too)."""
    from bench.research.train_pair_head import training_pairs

    a, b, y, _ = training_pairs(lang, random_pairs=random_pairs, stories_only=stories_only, more_files=more_files)
    if with_lang:
        a2, b2, y2, _ = training_pairs(with_lang, random_pairs=random_pairs, stories_only=stories_only)
        a, b, y = a + a2, b + b2, np.concatenate([y, y2])
    return a, b, y


def main(argv: list[str] | None = None) -> None:
    from dedup_tasks.embed.cross_training import save, train

    p = argparse.ArgumentParser()
    p.add_argument("--lang", default="en")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--side", type=int, default=64)
    p.add_argument("--decay", action="store_true", help="warm up over 5%% of the steps, then decay the rate linearly to 0")
    p.add_argument("--no-random", action="store_true", help="train without the random pairings (only labelled pairs)")
    p.add_argument("--save-model", default="", help="write the fine-tuned encoder and head (torch state) here")
    p.add_argument("--save", default="cross_probe_scores.npz", help="the scored pairs, for report()")
    p.add_argument("--seed", type=int, default=0, help="of the weight init order and the batches drawn")
    p.add_argument("--more-files", action="store_true", help="also train on MORE_TRAIN_FILES (zh: the dev pair files)")
    p.add_argument("--with-lang", default="", help="also train on this language's pairs (one multilingual model; "
                   "scored and reported on --lang only)")
    p.add_argument("--hold-stories-only", action="store_true",
                   help="hold out only the dev stories evaluated here and on the planted crawl (more pairs to train on)")
    args = p.parse_args(argv)
    a, b, y = training_set(args.lang, args.with_lang, random_pairs=not args.no_random,
                           stories_only=args.hold_stories_only, more_files=args.more_files)
    print(f"{args.lang}: {len(a):,} training pairs ({int(y.sum()):,} positive)", flush=True)
    t0 = time.time()
    cross = train(a, b, y, steps=args.steps, batch=args.batch, lr=args.lr, side=args.side, decay=args.decay, seed=args.seed,
                  log=lambda line: print("  " + line, flush=True))
    if args.save_model:
        save(cross, args.save_model)
    save_scores(cross, args.lang, args.save)
    report(args.save)
    print(f"done in {time.time() - t0:.0f} s")


def _tail_threshold(score: np.ndarray, dup: np.ndarray, dataset: np.ndarray, rate: float) -> float:
    """The lowest threshold that, per dev dataset, a normal fitted to that dataset's negatives expects
    to pass at most ``rate`` of them: the bar is 0.5% of same-topic pages, far below what the few
    hundred dev negatives can show by counting, so their tail is extrapolated (per dataset, because
    STS-B's easy negatives would hide MRPC's hard ones in a pooled fit)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1.0 - rate)
    out = -np.inf
    for name in np.unique(dataset):
        neg = score[(dataset == name) & ~dup]
        if len(neg) > 5:
            out = max(out, float(neg.mean() + z * neg.std(ddof=1)))
    return out


def _per_story(values: np.ndarray, story: np.ndarray, n: int, how: str) -> np.ndarray:
    """Each story's mean (or min) of its sentence-pair values; -inf for a story without any."""
    count = np.bincount(story, minlength=n)
    if how == "min":
        out = np.full(n, np.inf)
        np.minimum.at(out, story, values)
    else:
        out = np.divide(np.bincount(story, weights=values, minlength=n), count, out=np.full(n, np.inf), where=count > 0)
    out[count == 0] = -np.inf
    return out


def report(path: str, rate: float = 0.005) -> None:
    """Story scores from the saved pair logits, several ways of pooling them; dev thresholds (recall at
    precision 1.0, and the normal-tail rule) applied to test."""
    from statistics import NormalDist

    from bench.research.reworded_tune import _recall_at

    f = np.load(path)
    scores: dict[str, dict[str, np.ndarray]] = {}
    sym_of = {split: 0.5 * (f[f"{split}_ab"] + f[f"{split}_ba"]) for split in ("dev", "test")}
    for split in ("dev", "test"):
        story, cos, n, sym = f[f"{split}_story"], f[f"{split}_cos"], len(f[f"{split}_dup"]), sym_of[split]
        prob = 1.0 / (1.0 + np.exp(-sym))
        pooled = {"aligned cosine": cos, "cross mean prob": prob, "cross mean logit": sym,
                  "cross min logit": sym, "cross prob+cos": 0.5 * (prob + cos)}
        scores[split] = {name: _per_story(v, story, n, "min" if "min" in name else "mean") for name, v in pooled.items()}
    dev_dup, test_dup = f["dev_dup"], f["test_dup"]
    sent = scores["test"]
    story_t = f["test_story"]
    sym_t = sym_of["test"]
    from bench.research.train_pair_head import auc
    if "mrpc_test_logit" in f:
        lab = f["mrpc_test_label"].astype(float)
        print(f"MRPC test, all {len(lab)} pairs: AUC of the cross logit {auc(f['mrpc_test_logit'], lab):.3f}, "
              f"accuracy at logit 0 {float(((f['mrpc_test_logit'] > 0) == (lab > 0)).mean()):.3f}")
    print(f"test sentence pairs: AUC of the cross logit {auc(sym_t, test_dup[story_t].astype(float)):.3f}, "
          f"of the cosine {auc(f['test_cos'], test_dup[story_t].astype(float)):.3f}")
    for split in ("dev", "test"):
        story, dup, ds = f[f"{split}_story"], f[f"{split}_dup"], f[f"{split}_dataset"]
        per_pair = {"aligned cosine": f[f"{split}_cos"], "cross mean logit": sym_of[split]}
        for name in np.unique(ds):
            in_pairs, in_stories = ds[story] == name, ds == name
            for score, pair_score in per_pair.items():
                mean = scores[split][score]
                pos, neg = mean[in_stories & dup], mean[in_stories & ~dup]
                sep = (pos.mean() - neg.mean()) / np.sqrt(0.5 * (pos.var() + neg.var()))
                tail = neg.mean() + NormalDist().inv_cdf(1.0 - rate) * neg.std(ddof=1)
                print(f"  {split} {name} {score}: sentence-pair AUC {auc(pair_score[in_pairs], dup[story][in_pairs].astype(float)):.3f}; "
                      f"stories {len(pos)} / {len(neg)}, separation d' {sep:.2f}, recall where a normal fit "
                      f"passes {rate:.1%} of the negatives {float((pos >= tail).mean()):.3f}")
    from dedup_tasks.layers.semantic import CROSS_MIN_COS as gate

    for split in ("dev", "test"):
        aligned, dup = scores[split]["aligned cosine"], f[f"{split}_dup"]
        print(f"  {split} aligned-cosine gate (CROSS_MIN_COS {gate}): lowest rewrite {aligned[dup].min():.3f}, "
              f"rewrites below {int((aligned[dup] < gate).sum())}/{int(dup.sum())}, "
              f"same-topic below (never read) {int((aligned[~dup] < gate).sum())}/{int((~dup).sum())}")
    from dedup_tasks.embed.cross_encoder import ORDER_BAND, pair_values

    for split in ("dev", "test"):
        story, cos, n = f[f"{split}_story"], f[f"{split}_cos"], len(f[f"{split}_dup"])
        for kind in ("logit", "prob_cos"):
            one = _per_story(pair_values(f[f"{split}_ab"], cos, kind), story, n, "mean")
            both = _per_story(pair_values(sym_of[split], cos, kind), story, n, "mean")
            err = np.abs(one - both)[np.isfinite(one)]
            print(f"  {split} {kind} read in one order (newer first): largest error of a story {err.max():.3f} "
                  f"(band {ORDER_BAND[kind]}: {'inside' if err.max() < ORDER_BAND[kind] else 'OUTSIDE'})")
    need = NormalDist().inv_cdf(1.0 - rate) + NormalDist().inv_cdf(0.6)
    print(f"  recall 0.6 with {rate:.1%} of the negatives through needs d' >= {need:.2f}")
    for name, dev in scores["dev"].items():
        for rule in ("precision 1.0", f"normal tail {rate:.1%}"):
            if rule == "precision 1.0":
                r, t = _recall_at(dev, dev_dup, 1.0)
            else:
                t = _tail_threshold(dev, dev_dup, f["dev_dataset"], rate)
                r = float((dev[dev_dup] >= t).mean())
            sc = sent[name]
            tp, fp = int((sc[test_dup] >= t).sum()), int((sc[~test_dup] >= t).sum())
            print(f"  {name:18s} {rule:18s}: dev recall {r:.3f} (>= {t:.3f}); test recall {tp / test_dup.sum():.3f}, "
                  f"precision {tp / max(tp + fp, 1):.3f}, same-topic dropped {fp}/{int((~test_dup).sum())}", flush=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["report"]:
        report(sys.argv[2])
    elif sys.argv[1:2] == ["rescore"]:  # rescore MODEL LANG OUT: a saved model against today's alignment
        from dedup_tasks.embed.cross_encoder import CrossEncoder

        save_scores(CrossEncoder(sys.argv[2], threads=2), sys.argv[3], sys.argv[4])
        report(sys.argv[4])
    else:
        main()
