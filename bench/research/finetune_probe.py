"""Does fine-tuning e5 on the train pairs separate the reworded dev stories better? (docs/semantic.md)

    python -m bench.research.finetune_probe [--mode bitfit|full] [--steps 300] [--lr 2e-3]

Trains e5-small (``embed.e5_torch``, bf16 where the CPU has it) on the English pairs that
``bench.research.train_pair_head`` trains on (MRPC train 1/0, STS-B train >= 4 / <= 2, one random pairing per
positive; every pair with a sentence of the evaluated dev stories left out) with the CoSENT loss over the
pair cosines, 32 pairs a step: ``bitfit`` trains the biases and LayerNorms only (60k parameters),
``full`` every encoder weight (the token table stays 4-bit and frozen). Then scores the first 600 English
dev stories as ``bench.research.reworded_tune dev trained`` does (sentence-aligned, 64-token sentences; head
cosine, 128 tokens) with the base and the tuned weights, and prints recall at precision 1.0 / 0.95.
Nothing is written to the product; the model stays in memory. Deterministic seeds; ~1.3-1.5 s a step on
2 cores (AMX).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _scores(model, items) -> dict[str, np.ndarray]:
    import torch

    from dedup_tasks.embed.aligned import embedded_sentences

    def encode(texts: list[str], max_tokens: int) -> np.ndarray:
        with torch.no_grad():
            return model.embed(texts, max_tokens)

    newer, older = [s.other for s in items], [s.source for s in items]
    split_new, split_old, index, vec = embedded_sentences(lambda t: encode(t, 64), newer, older)
    aligned = np.full(len(items), -1.0)
    for i, (a, b) in enumerate(zip(split_new, split_old, strict=True)):
        if a and b:
            aligned[i] = float((vec[[index[s] for s in a]] @ vec[[index[s] for s in b]].T).max(axis=1).mean())
    head = (encode(newer, 128) * encode(older, 128)).sum(1)
    return {"aligned": aligned, "head": head}


def train(model, a: list[str], b: list[str], y: np.ndarray, mode: str, steps: int, lr: float, seed: int = 0) -> None:
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    params = []
    for block in model.encoder:
        for sub in block:
            for name, p in sub.named_parameters():
                p.requires_grad_(mode == "full" or name == "bias" or isinstance(sub, torch.nn.LayerNorm))
                if p.requires_grad:
                    params.append(p)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.encoder.train()
    started = time.time()
    for step in range(steps):
        idx = rng.choice(len(a), 32, replace=False)
        ids = model.tokenizer.encode(["query: " + a[i] for i in idx] + ["query: " + b[i] for i in idx], 64)
        v = model.forward_ids(ids)
        cos = (v[:32] * v[32:]).sum(1)
        label = torch.tensor(y[idx], dtype=torch.float32)
        # CoSENT: every (positive i, negative j) pair should have cos_i > cos_j.
        diff = 20.0 * (cos[None, :] - cos[:, None]) - (1 - (label[:, None] > label[None, :]).float()) * 1e12
        loss = torch.logsumexp(torch.cat([torch.zeros(1), diff.flatten()]), 0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"  step {step}: loss {loss.item():.3f} ({time.time() - started:.0f} s)", flush=True)
    model.encoder.eval()
    print(f"  {sum(p.numel() for p in params):,} parameters trained, {time.time() - started:.0f} s")


def main(argv: list[str] | None = None) -> None:
    from bench.research.reworded_tune import _recall_at
    from bench.research.train_pair_head import EVAL_STORIES, training_pairs
    from bench.reworded import stories
    from dedup_tasks.embed.e5_torch import E5Torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("bitfit", "full"), default="bitfit")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=None, help="default 2e-3 (bitfit) / 2e-5 (full)")
    args = parser.parse_args(argv)
    lr = args.lr if args.lr is not None else (2e-3 if args.mode == "bitfit" else 2e-5)
    items = stories("dev")["en"][:EVAL_STORIES]
    dup = np.array([s.duplicate for s in items])
    a, b, y, _ = training_pairs("en")
    print(f"en: {len(a):,} training pairs ({int(y.sum()):,} positive); {len(items)} dev stories ({int(dup.sum())} rewrites)")
    model = E5Torch(threads=2)
    before = _scores(model, items)
    train(model, a, b, y, args.mode, args.steps, lr)
    after = _scores(model, items)
    for name in ("aligned", "head"):
        for label, scores in (("base", before[name]), (f"{args.mode} {args.steps} steps", after[name])):
            r1, t1 = _recall_at(scores, dup, 1.0)
            r95, t95 = _recall_at(scores, dup, 0.95)
            print(f"  {name:8s} {label:22s} recall @ precision 1.0 {r1:.3f} (>= {t1:.3f})  @ 0.95 {r95:.3f} (>= {t95:.3f})")


if __name__ == "__main__":
    main()
