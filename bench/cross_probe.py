"""Does e5-small fine-tuned as a cross-encoder confirm rewrites better than the aligned cosine? (docs/semantic.md, session 13)

    python -m bench.cross_probe [--lang en|zh] [--steps 900] [--batch 16] [--lr 3e-5] [--side 64]

Trains e5-small (``embed.e5_torch``) as a cross-encoder on the train pairs of ``bench.train_pair_head``
(the dev stories' sentences left out): each pair is read as one sequence ``<s> A </s></s> B </s>``
(both orders, 64 tokens a side), its mean-pooled vector goes through one linear unit, binary
cross-entropy, every encoder weight trained (the token table stays 4-bit and frozen), 16 pairs a step.
A story pair is then scored sentence by sentence: each newer sentence is aligned to its nearest earlier
sentence by the base model's cosine, exactly as the aligned score does, and the cross-encoder's
probabilities of those pairs are averaged ("cross mean"; "cross+cos mean" averages probability and
cosine). Prints, per score, recall at precision 1.0 / 0.95 on the first 600 dev stories and, at each
of those dev thresholds, recall, precision and same-topic pages dropped on the test stories. Nothing is
written to the product; the model stays in memory. ~0.9 s a step on 2 cores.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def pair_ids(tok, a: list[str], b: list[str], side: int) -> list[list[int]]:
    ea = tok.encode(["query: " + x for x in a], side)
    eb = tok.encode(["query: " + x for x in b], side)
    # XLM-R pair layout: <s> A </s></s> B </s>
    return [x + [tok.eos] + y[1:] for x, y in zip(ea, eb, strict=True)]


def main() -> None:
    import torch

    from bench.reworded import stories
    from bench.reworded_tune import _recall_at
    from bench.train_pair_head import EVAL_STORIES, training_pairs
    from dedup_tasks.embed.aligned import embedded_sentences
    from dedup_tasks.embed.e5_torch import E5Torch

    p = argparse.ArgumentParser()
    p.add_argument("--lang", default="en")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--side", type=int, default=64)
    args = p.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    items = stories("dev")[args.lang][:EVAL_STORIES]
    dup = np.array([s.duplicate for s in items])
    test_items = stories("test")[args.lang][:EVAL_STORIES]
    test_dup = np.array([s.duplicate for s in test_items])
    a, b, y, counts = training_pairs(args.lang)
    print(f"{args.lang}: {len(a):,} training pairs ({int(y.sum()):,} positive); {len(items)} stories ({int(dup.sum())} rewrites)", flush=True)
    model = E5Torch(threads=2)
    def align(items):
        newer, older = [s.other for s in items], [s.source for s in items]
        with torch.no_grad():
            split_new, split_old, index, vec = embedded_sentences(lambda t: model.embed(t, 64), newer, older)
        aligned = np.full(len(items), -1.0)
        pairs: list[tuple[int, str, str, float]] = []
        for i, (sa, sb) in enumerate(zip(split_new, split_old, strict=True)):
            if sa and sb:
                sims = vec[[index[s] for s in sa]] @ vec[[index[s] for s in sb]].T
                aligned[i] = float(sims.max(axis=1).mean())
                for r, s in enumerate(sa):
                    pairs.append((i, s, sb[int(sims[r].argmax())], float(sims[r].max())))
        return aligned, pairs

    aligned, pairs = align(items)
    test_aligned, test_pairs = align(test_items)
    print(f"test: {len(test_items)} stories ({int(test_dup.sum())} rewrites)", flush=True)
    for prec in (1.0, 0.95):
        r, t = _recall_at(aligned, dup, prec)
        print(f"  aligned cosine: recall @ precision {prec} {r:.3f} (>= {t:.3f})", flush=True)

    head = torch.nn.Linear(384, 1)
    torch.nn.init.zeros_(head.weight)
    params = [q for blk in model.encoder for sub in blk for q in sub.parameters()]
    for q in params:
        q.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": params, "lr": args.lr}, {"params": head.parameters(), "lr": 1e-2}])
    model.encoder.train()
    t0 = time.time()
    losses = []
    for step in range(args.steps):
        idx = rng.choice(len(a), args.batch, replace=False)
        # both orders, so the score is symmetric enough
        aa = [a[i] if k % 2 == 0 else b[i] for k, i in enumerate(idx)]
        bb = [b[i] if k % 2 == 0 else a[i] for k, i in enumerate(idx)]
        logit = head(model.forward_ids(pair_ids(model.tokenizer, aa, bb, args.side)) * 10.0).squeeze(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, torch.tensor(y[idx], dtype=torch.float32))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 25 == 0:
            print(f"  step {step}: loss {np.mean(losses[-25:]):.3f} ({time.time() - t0:.0f} s)", flush=True)
    model.encoder.eval()

    def cross(x: list[str], z: list[str]) -> np.ndarray:
        out = []
        with torch.no_grad():
            for s in range(0, len(x), 64):
                out.append(torch.sigmoid(head(model.forward_ids(pair_ids(model.tokenizer, x[s:s + 64], z[s:s + 64], args.side)) * 10.0)).squeeze(1).numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def story_scores(items, pairs):
        prob = cross([q[1] for q in pairs], [q[2] for q in pairs])
        story = np.array([q[0] for q in pairs])
        cos = np.array([q[3] for q in pairs])
        mean = np.full(len(items), -1.0)
        blend = np.full(len(items), -1.0)
        for i in np.unique(story):
            mean[i] = prob[story == i].mean()
            blend[i] = (0.5 * prob[story == i] + 0.5 * cos[story == i]).mean()
        return {"cross mean": mean, "cross+cos mean": blend}

    dev_scores = story_scores(items, pairs)
    test_scores = story_scores(test_items, test_pairs)
    test_scores["aligned cosine"] = test_aligned
    dev_scores["aligned cosine"] = aligned
    for name in ("aligned cosine", "cross mean", "cross+cos mean"):
        for prec in (1.0, 0.95):
            r, t = _recall_at(dev_scores[name], dup, prec)
            sc = test_scores[name]
            tp, fp = int((sc[test_dup] >= t).sum()), int((sc[~test_dup] >= t).sum())
            print(f"  {name}: dev recall @ precision {prec} {r:.3f} (>= {t:.3f}); test at that threshold: recall {tp / test_dup.sum():.3f},"
                  f" precision {tp / max(tp + fp, 1):.3f}, same-topic dropped {fp}/{int((~test_dup).sum())}", flush=True)
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
