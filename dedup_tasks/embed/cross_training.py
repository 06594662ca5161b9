"""Train the cross-encoder L4's sketch path confirms rewrites with (``embed.cross_encoder``).

No weights ship with the product, so a deployment trains its own from labelled sentence pairs:

    python -m dedup_tasks cross-encoder train --pairs pairs.jsonl [--pairs more.jsonl] --out cross_en.pt

Each line of a pairs file is a JSON object with ``text1``, ``text2`` and ``label``: 1 / 0 (the same
statement or not), or a similarity score with ``--min-score`` (pairs at or above it are positive,
pairs below ``--max-negative`` negative, the rest left out). The recipe is the one measured in
docs/semantic.md: every encoder weight of the shipped e5-small fine-tuned (the token table
stays 4-bit and frozen), one linear unit on the mean-pooled pair, binary cross-entropy, each pair read
both ways round, 16 pairs a step, warm-up over 5% of the steps then a linear decay; ~0.7 s a step on 2
cores. The file is written to a temporary name and renamed: an interrupted run leaves no half file.

A model's logits have no fixed scale: its threshold (``semantic_cross_threshold_<lang>``) is read on
held-out pairs of the deployment's own, as ``bench.research.cross_probe`` does on the dev stories.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dedup_tasks.cli_errors import ErrorLineParser
from dedup_tasks.embed.cross_encoder import POOLED_SCALE, CrossEncoder, pair_ids
from dedup_tasks.io import InputError


class PairsError(InputError):
    """Pairs that cannot be trained on: the file and line, or what the set lacks (the command line
    reports it as bad input, exit code 2)."""


def read_pairs(
    path: str | Path, min_score: float | None = None, max_negative: float | None = None
) -> tuple[list[str], list[str], np.ndarray]:
    """(first texts, second texts, labels 0/1) of a JSONL pairs file (see the module docstring)."""
    a, b, y = [], [], []
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines: U+2028 may sit in a JSON string
    except OSError as exc:
        raise PairsError(f"{path}: cannot read the pairs file ({exc.strerror or exc})") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            t1, t2, label = str(row["text1"]).strip(), str(row["text2"]).strip(), float(row["label"])
        except (ValueError, KeyError, TypeError) as exc:
            raise PairsError(f"{path}, line {number}: expected JSON with text1, text2 and a numeric label ({exc})") from exc
        if min_score is None:
            if label not in (0.0, 1.0):
                raise PairsError(f"{path}, line {number}: label {label:g} is not 0 or 1 (a score needs --min-score)")
            positive = label == 1.0
        elif label >= min_score:
            positive = True
        elif max_negative is None or label < max_negative:
            positive = False
        else:
            continue
        if t1 and t2:
            a.append(t1)
            b.append(t2)
            y.append(positive)
    return a, b, np.array(y, bool)


def train(
    a: list[str], b: list[str], y: np.ndarray, steps: int = 700, batch: int = 16, lr: float = 3e-5, side: int = 64,
    decay: bool = True, seed: int = 0, threads: int = 2, log: Callable[[str], None] | None = None,
) -> CrossEncoder:
    """A cross-encoder fine-tuned from the shipped e5-small on the pairs (a[i], b[i]) labelled ``y``."""
    import torch

    from dedup_tasks.embed.e5_torch import E5Torch

    if len(a) < batch or not 0 < int(np.sum(y)) < len(y):
        raise PairsError(f"need at least {batch} pairs, positive and negative ones; got {len(a)} ({int(np.sum(y))} positive)")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = E5Torch(threads=threads)
    head = torch.nn.Linear(model.H, 1)
    torch.nn.init.zeros_(head.weight)
    params = [q for block in model.encoder for sub in block for q in sub.parameters()]
    for q in params:
        q.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": params, "lr": lr}, {"params": head.parameters(), "lr": 1e-2}])
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: min(1.0, (k + 1) / warm) * max(0.0, (steps - k) / (steps - warm + 1)) if decay else 1.0)
    labels = np.asarray(y, np.float32)
    model.encoder.train()
    started, losses = time.time(), []
    for step in range(steps):
        idx = rng.choice(len(a), batch, replace=False)
        # Half of each batch read the other way round: the model learns no order.
        first = [a[i] if k % 2 == 0 else b[i] for k, i in enumerate(idx)]
        second = [b[i] if k % 2 == 0 else a[i] for k, i in enumerate(idx)]
        logit = head(model.forward_ids(pair_ids(model.tokenizer, first, second, side)) * POOLED_SCALE).squeeze(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, torch.from_numpy(labels[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log and (step % 25 == 0 or step == steps - 1):
            log(f"step {step}: loss {np.mean(losses[-25:]):.3f} ({time.time() - started:.0f} s)")
    for q in params:
        q.requires_grad_(False)
    return CrossEncoder.from_parts(model, head, side)


def save(cross: CrossEncoder, path: str | Path) -> Path:
    """``cross`` as a file ``CrossEncoder(path)`` loads; written to a temporary name, then renamed."""
    import torch

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        torch.save(cross.state(), tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = ErrorLineParser(
        prog="python -m dedup_tasks cross-encoder",
        description="Train the cross-encoder that confirms L4's rewrite candidates (semantic_cross_encoder_<lang>).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    t = sub.add_parser("train", help="fine-tune the shipped e5-small on labelled pairs and write the model file")
    t.add_argument("--pairs", action="append", required=True, type=Path, help="a JSONL pairs file (repeatable)")
    t.add_argument("--out", required=True, type=Path, help="the model file to write")
    t.add_argument("--min-score", type=float, help="labels are scores: this and above is positive")
    t.add_argument("--max-negative", type=float, help="with --min-score: below this is negative (default: below --min-score)")
    t.add_argument("--steps", type=int, default=700)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--lr", type=float, default=3e-5)
    t.add_argument("--seed", type=int, default=0)
    return parser


def cross_encoder_main(argv: list[str]) -> int:
    """``python -m dedup_tasks cross-encoder train ...``; a PairsError reaches the command line's handler."""
    args = build_parser().parse_args(argv)
    a, b, per_file = [], [], []
    for path in args.pairs:
        first, second, labels = read_pairs(path, args.min_score, args.max_negative)
        a += first
        b += second
        per_file.append(labels)
    labels = np.concatenate(per_file)
    print(f"{len(a):,} pairs ({int(labels.sum()):,} positive) from {len(args.pairs)} file(s)", file=sys.stderr)
    cross = train(a, b, labels, steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed,
                  log=lambda line: print(line, file=sys.stderr, flush=True))
    save(cross, args.out)
    print(f"wrote {args.out} ({CrossEncoder(args.out).model_id}); read its threshold on held-out pairs of your own")
    return 0
