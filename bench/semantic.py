"""L4 on the synthetic crawl: ``python -m bench semantic --size small`` (wired by bench/__main__.py, which it never imports).

Runs the whole default cascade (L1-L4, suspects mode) on a generated crawl, publishing each hour so
candidates of earlier hours are read back from their partition, and reports per hour the share of
the batch embedded (suspects + their candidates, target <= 5%), the semantic layer's docs/s (rows
entering L4 / L4 seconds, and embedded texts / L4 seconds), and against the truth file: the true
duplicates L4 catches beyond L1-L3 and its false drops, per language. "L1-L3" is the same run with
L4's drops counted as keeps (L4 runs last, so within an hour nothing else changes; across hours a
document L4 dropped is not registered, a difference of a few rows at most).

Writes ``bench/results/semantic-<size>.json``. Seconds are wall time on a 2-core machine shared
with other jobs: treat them as indicative.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.harness import SIZES, WORK, crawl, hour_ids, write_result


@contextlib.contextmanager
def bench_registry(config, db_url: str | None) -> Iterator[Any]:
    """The registry the hours run against: in memory, or with ``db_url`` a PostgreSQL registry of the
    pipeline's own making (``open_registry``) in a scratch schema, dropped afterwards. The sketch
    path's vectors then go through the database's vector store, as an hourly run's do."""
    if not db_url:
        from dedup_tasks.registry.base import MemoryRegistry

        yield MemoryRegistry()
        return
    import psycopg2

    from dedup_tasks.registry.connect import open_registry
    from dedup_tasks.registry.migrate import scratch_schema

    conn = psycopg2.connect(db_url)
    try:
        with scratch_schema(conn, "bench_semantic") as schema, open_registry(
            dataclasses.replace(config, db_url=db_url, db_schema=schema), schema=schema
        ) as registry:
            yield registry
    finally:
        conn.close()


@contextlib.contextmanager
def recording() -> Iterator[dict[str, list]]:
    """Records, while it is open, every rewrite candidate pair of the semantic layer (newer doc_id,
    earlier doc_id) and every sentence-aligned score (newer, earlier, score): what the reworded table
    reads for its candidate recall and its dev thresholds. Wraps the layer's own methods; the
    decisions are those of an unwrapped run."""
    from dedup_tasks.layers.base import strings_np
    from dedup_tasks.layers.semantic import SemanticLayer

    seen: dict[str, list] = {"candidates": [], "scores": []}
    sketch_pairs, aligned = SemanticLayer.sketch_pairs, SemanticLayer._aligned

    def rec_sketch(self, batch, *args, **kwargs):
        out = sketch_pairs(self, batch, *args, **kwargs)
        docs = strings_np(batch, "doc_id")
        seen["candidates"].extend(zip(docs[out[0]].astype(str), out[1].astype(str), strict=True))
        return out

    def rec_aligned(self, batch, ctx, store, cos, mask, sus_row, cand_row, in_batch, cand_doc, cand_batch):
        out = aligned(self, batch, ctx, store, cos, mask, sus_row, cand_row, in_batch, cand_doc, cand_batch)
        docs = strings_np(batch, "doc_id")
        at = np.flatnonzero(mask)
        seen["scores"].extend(zip(docs[sus_row[at]].astype(str), cand_doc[at].astype(str), out.score[at].astype(float), strict=True))
        return out

    SemanticLayer.sketch_pairs, SemanticLayer._aligned = rec_sketch, rec_aligned
    try:
        yield seen
    finally:
        SemanticLayer.sketch_pairs, SemanticLayer._aligned = sketch_pairs, aligned


def run(
    size: str, seed: int = 0, overrides: dict[str, Any] | None = None, hours: int | None = None, reworded: str | None = None,
    db_url: str | None = None,
) -> dict[str, Any]:
    from bench.score import score
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.contract import CROSS_SCORE_KINDS
    from dedup_tasks.io import BatchPaths, read_input
    from dedup_tasks.pipeline import publish, run_batch

    spec = SIZES[size]
    n_hours = hours or spec["hours"]
    root = crawl(spec["docs"], n_hours, seed)
    if reworded:
        from bench.reworded import plant

        # Rewrites and same-topic negatives from real paraphrase pairs, planted in every hour.
        root = plant(root, WORK / f"crawl-{spec['docs']}x{n_hours}-seed{seed}-reworded-{reworded}", reworded, seed=seed)
    out = WORK / f"semantic-{size}-seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    config = DedupConfig(root=str(out), **(overrides or {}))
    truth = pd.read_parquet(root / "truth.parquet")
    decisions, hours = [], []
    with bench_registry(config, db_url) as registry, recording() as seen:
        for batch_id in hour_ids(root):
            table, _ = read_input(BatchPaths(root, batch_id).input)
            started, cpu = time.perf_counter(), time.process_time()
            result = run_batch(table, batch_id, config, registry)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            publish(BatchPaths(out, batch_id), result)
            decisions.append(result.decisions.to_pandas())
            sem = next((s for s in result.summary.layers if s.layer == "semantic"), None)
            extra = dict(sem.extra) if sem is not None else {}
            hours.append(
                {
                    "batch_id": batch_id,
                    "docs": table.num_rows,
                    "batch_seconds": round(wall, 1),
                    "batch_cpu_seconds": round(cpu, 1),
                    "load_average": list(os.getloadavg()),
                    "semantic_rows_in": sem.rows_in if sem else 0,
                    "semantic_dropped": sem.dropped if sem else 0,
                    "semantic_seconds": round(sem.seconds, 1) if sem else 0.0,
                    "semantic_docs_per_s": (sem.rows_in / sem.seconds) if sem and sem.seconds else None,
                    "embedded_texts_per_s": (extra.get("embedded", 0) / sem.seconds) if sem and sem.seconds else None,
                    "embedded_share": extra.get("embedded", 0) / table.num_rows,
                    # The transformer's own rate on the sentences the sketch path's confirmers embedded.
                    "sentences_per_s": (extra["sentences_embedded"] / extra["sentence_embed_seconds"])
                    if extra.get("sentence_embed_seconds") else None,
                    **extra,
                }
            )
            print(f"{batch_id}: {hours[-1]}", flush=True)
    dec = pd.concat(decisions, ignore_index=True)
    without = dec.copy()
    l4 = without["layer"].eq("semantic") & without["action"].eq("drop")
    without.loc[l4, "action"] = "keep"
    with_l4, base = score(dec, truth), score(without, truth)

    # L4's own drops by language and truth kind. A corpus copy is unjudged (bench.score): neither a
    # true nor a false drop. A false drop whose two articles a reader judged distinct
    # (bench/reviewed_copies.csv) is "reviewed"; the rest were never read by one.
    from bench.corpus_copies import reviewed_pairs
    from bench.score import UNJUDGED_KINDS

    t = truth.set_index(truth["doc_id"].astype(str))
    drops = dec[l4].copy()
    drops["doc_id"] = drops["doc_id"].astype(str)
    drops = drops.join(t[["lang", "kind", "is_duplicate"]], on="doc_id")
    reviewed = reviewed_pairs()
    if "article_id" in t.columns:
        pairs = zip(t["article_id"].reindex(drops["doc_id"]), t["article_id"].reindex(drops["matched_doc_id"].astype(str)), strict=True)
        drops["verdict"] = [reviewed.get(frozenset((a, b)), (None,))[0] if pd.notna(a) and pd.notna(b) else None for a, b in pairs]
    else:
        drops["verdict"] = None
    non_dup = truth[~truth["is_duplicate"].astype(bool) & ~truth["kind"].isin(UNJUDGED_KINDS)].groupby("lang").size()
    by_lang = {}
    for lang, g in drops.groupby("lang"):
        judged = g[~g["kind"].isin(UNJUDGED_KINDS)]
        false = judged[~judged["is_duplicate"].astype(bool)]
        fp = len(false)
        by_lang[str(lang)] = {
            "drops": len(g),
            "true_duplicates": int(judged["is_duplicate"].astype(bool).sum()),
            "corpus_copies": len(g) - len(judged),
            "false_drops": fp,
            "false_drops_reviewed_distinct": int((false["verdict"] == "distinct").sum()),
            "precision": (len(judged) - fp) / len(judged) if len(judged) else None,
            "false_drop_rate": fp / int(non_dup.get(lang, 1)),
            "false_drops_by_kind": false["kind"].value_counts().to_dict(),
            **{f"{kind}_min": (float(v.min()) if len(v) else None)
               for kind, v in (("cosine", g.loc[~g["score_kind"].isin(CROSS_SCORE_KINDS), "score"]),
                               *((k, g.loc[g["score_kind"] == k, "score"]) for k in CROSS_SCORE_KINDS))},
            "threshold": sorted(set(g["threshold"].dropna().round(4).tolist())),
        }
    if reworded:
        data_reworded = reworded_table(dec, truth, seen)
    keys = ("precision", "recall", "f1", "false_drop_rate", "must_keep_false_drop_rate", "by_lang", "recall_near_by_band")
    data = {
        "size": size,
        "seed": seed,
        "config": bench_config(config),
        "registry": "postgresql" if db_url else "memory",
        "hours": hours,
        "L1-L3": {k: base[k] for k in keys},
        "L1-L4": {k: with_l4[k] for k in keys},
        "extra_true_duplicates": with_l4["counts"]["tp"] - base["counts"]["tp"],
        "extra_false_drops": with_l4["counts"]["fp"] - base["counts"]["fp"],
        "semantic_drops_by_lang": by_lang,
        "reworded": data_reworded if reworded else None,
        "reworded_split": reworded,
        "note": "wall seconds on 2 shared cores (other engineers' jobs running): indicative only",
    }
    print(
        f"extra true duplicates {data['extra_true_duplicates']}, extra false drops {data['extra_false_drops']}; "
        f"recall {base['recall']:.3f} -> {with_l4['recall']:.3f}, false-drop rate {base['false_drop_rate']:.4f} -> "
        f"{with_l4['false_drop_rate']:.4f}; by language {by_lang}"
    )
    return data


def bench_config(config) -> dict[str, Any]:
    """The L4 settings of a run, a cross-encoder file named by its file name and model id (not its
    path: results are committed and hold no path of the machine that wrote them)."""
    from dedup_tasks.embed.cross_encoder import get_cross_encoder

    out = {k: v for k, v in config.decision_fields().items() if k.startswith(("semantic", "suspect", "embed"))}
    for lang in ("en", "zh"):
        if path := out.get(f"semantic_cross_encoder_{lang}"):
            out[f"semantic_cross_encoder_{lang}"] = f"{Path(path).name} ({get_cross_encoder(path).model_id})"
    return out


def reworded_table(dec: pd.DataFrame, truth: pd.DataFrame, seen: dict[str, list] | None = None) -> dict[str, Any]:
    """Per language: L4's recall on the rewrites, its precision, false drops on the same-topic negatives;
    with ``seen`` (``recording``) also the share of rewrites whose source was a candidate
    (``candidate_recall``) and, from the aligned scores, ``tail_threshold``: the lowest score above
    every scored same-topic pair, with the rewrites' recall among those scored at it (on dev: the
    threshold rule; on test: reported, never read)."""
    t = truth.assign(doc_id=truth["doc_id"].astype(str)).set_index("doc_id")
    d = dec.assign(doc_id=dec["doc_id"].astype(str)).join(t[["lang", "kind", "is_duplicate", "source_doc_id"]], on="doc_id", rsuffix="_t")
    lang_col = "lang_t" if "lang_t" in d.columns else "lang"
    dropped = d["action"].eq("drop")
    l4 = dropped & d["layer"].eq("semantic")
    out: dict[str, Any] = {}
    cand = {tuple(p) for p in (seen or {}).get("candidates", [])}
    scores = pd.DataFrame((seen or {}).get("scores", []), columns=["doc_id", "cand", "score"]).drop_duplicates(["doc_id", "cand"])
    scores = scores.join(t[["kind", "source_doc_id", "lang"]], on="doc_id")
    for lang, g in d.groupby(lang_col):
        rw, neg = g["kind"].eq("reworded"), g["kind"].eq("same_topic")
        l4g = l4[g.index]
        n_l4 = int(l4g.sum())
        true_l4 = int((l4g & g["is_duplicate"].astype(bool)).sum())
        out[str(lang)] = {
            "reworded": int(rw.sum()),
            "reworded_dropped_any_layer": int((rw & dropped[g.index]).sum()),
            "reworded_dropped_L4": int((rw & l4g).sum()),
            "L4_recall_reworded": float((rw & l4g).sum() / max(int(rw.sum()), 1)),
            "L4_drops": n_l4,
            "L4_precision": float(true_l4 / n_l4) if n_l4 else None,
            "same_topic": int(neg.sum()),
            "same_topic_false_drops": int((neg & dropped[g.index]).sum()),
            "same_topic_false_drop_rate": float((neg & dropped[g.index]).sum() / max(int(neg.sum()), 1)),
        }
        if seen is not None:
            pairs = g.loc[rw, ["doc_id", "source_doc_id"]].astype(str)
            out[str(lang)]["candidate_recall"] = float(np.mean([p in cand for p in zip(pairs["doc_id"], pairs["source_doc_id"], strict=True)])) if len(pairs) else None
            s = scores[scores["lang"] == lang]
            own = s[(s["kind"] == "reworded") & (s["cand"] == s["source_doc_id"].astype(str))]["score"]
            negative = s[s["kind"] == "same_topic"]["score"]
            tail = float(np.nextafter(negative.max(), 2.0)) if len(negative) else None
            out[str(lang)]["rewrites_scored"] = len(own)
            out[str(lang)]["same_topic_scored"] = len(negative)
            out[str(lang)]["tail_threshold"] = tail
            out[str(lang)]["recall_at_tail"] = float((own >= tail).sum() / max(int(rw.sum()), 1)) if tail is not None else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench semantic")
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="DedupConfig override")
    parser.add_argument("--name", default=None, help="result name (default semantic-<size>)")
    parser.add_argument("--hours", type=int, default=None, help="hours of the crawl (default: the size's)")
    parser.add_argument(
        "--reworded", choices=["dev", "test"], default=None,
        help="plant the reworded kind from the train/dev (tuning) or test (reporting only) paraphrase files",
    )
    parser.add_argument(
        "--db-url", default=None,
        help="run against a PostgreSQL registry in a scratch schema (dropped afterwards) instead of one in memory",
    )
    args = parser.parse_args(argv)
    from dedup_tasks.config import DedupConfig

    overrides = dict(kv.split("=", 1) for kv in args.set)
    typed = DedupConfig.from_mapping(overrides).decision_fields() if overrides else {}
    data = run(args.size, args.seed, {k: typed[k] for k in overrides}, hours=args.hours, reworded=args.reworded, db_url=args.db_url)
    write_result(args.name or f"semantic-{args.size}", data)
    return 0
