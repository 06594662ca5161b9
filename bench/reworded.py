"""The ``reworded`` kind: the same story told in other words, from real human paraphrases.

L4 exists for "two articles telling the same story in other words". No generator edit makes that
honestly, so the documents are assembled from labelled paraphrase pairs (``pairs/`` of the evaluation
data, found through ``bench.evaldata``):

* an article is ``k`` sentences ``text1`` of positive pairs (English: MRPC positives, STS-B >= 4;
  Chinese: Chinese-STS-B >= 4, AFQMC/ATEC/BQ/LCQMC positives); its **rewrite** (kind ``reworded``, a
  duplicate) is the matching ``text2`` sentences, on another site under another URL with that site's
  boilerplate, fetched later (in the same hour or the next);
* a **same-topic negative** (kind ``same_topic``, must keep) is assembled the same way from the
  low-score pairs of the same files (MRPC/LCQMC/... label 0, STS-B <= 2): sentence by sentence it
  talks about the same thing as an article of the crawl, but it says something else. The generated
  crawl's own originals (other articles of the same corpus categories) are the easy negatives.

``split="dev"`` reads only train/dev files (what thresholds are tuned on); ``split="test"`` reads the
held-out files (SOHU dd/dc strict matches as whole documents, MRPC test) and is for reporting only.

``plant(src, dst, split)`` copies a generated crawl and adds these documents to every hour, with
their truth rows, so ``bench semantic`` scores them beside every other kind.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.evaldata import eval_data_available, eval_data_dir, missing_reason

# (file, positive rule, negative rule, sentences per article) per language and split.
SOURCES: dict[str, dict[str, list[tuple[str, str, str, int]]]] = {
    "dev": {
        "en": [
            ("en_mrpc_train.jsonl", "label==1", "label==0", 5),
            ("en_stsb_train.jsonl", "label>=4", "label<=2", 5),
            ("en_stsb_dev.jsonl", "label>=4", "label<=2", 5),
        ],
        "zh": [
            ("zh_chinese_sts_b_train.jsonl", "label>=4", "label<=1", 6),
            ("zh_afqmc_dev.jsonl", "label==1", "label==0", 8),
            ("zh_atec_train.jsonl", "label==1", "label==0", 8),
            ("zh_bq_dev.jsonl", "label==1", "label==0", 8),
            ("zh_lcqmc_dev.jsonl", "label==1", "label==0", 8),
        ],
    },
    "test": {
        "en": [("en_mrpc_test.jsonl", "label==1", "label==0", 5)],
        # SOHU pairs are news documents already: one pair is one article (5 = strict match, 0 = none).
        "zh": [("zh_sohu_dd_test.jsonl", "label==5", "label==0", 1), ("zh_sohu_dc_test.jsonl", "label==5", "label==0", 1)],
    },
}
KIND_REWORDED = "reworded"
KIND_SAME_TOPIC = "same_topic"
SITES_PER_LANG = 6


@dataclass(frozen=True)
class Story:
    """One planted pair: ``source`` (an original) and ``other`` (its rewrite, or a same-topic negative)."""

    lang: str
    dataset: str
    source: str
    other: str
    duplicate: bool


def _rule(rule: str, label: float) -> bool:
    op, value = rule[5:7], float(rule[7:])
    return {"==": label == value, ">=": label >= value, "<=": label <= value}[op]


_ENDS = ".!?;。！？；…\"'”’)）"


def _join(sentences: list[str], lang: str) -> str:
    """An article of these sentences. A sentence without an end mark gets one ("." / "。"): most
    AFQMC/ATEC/BQ questions and a third of STS-B sentences have none, and run together they made
    Chinese articles of one unpunctuated run, which no page is and no sentence-level score can read."""
    end = "." if lang == "en" else "。"
    parts = [s.strip() for s in sentences if s.strip()]
    return (" " if lang == "en" else "").join(s if s[-1] in _ENDS else s + end for s in parts)


def stories(split: str, seed: int = 0) -> dict[str, list[Story]]:
    """Every article this split's files give, per language, shuffled: rewrites and negatives."""
    if split not in SOURCES:
        raise ValueError(f"split must be one of {sorted(SOURCES)}, got {split!r}")
    if not eval_data_available("pairs"):
        raise FileNotFoundError(missing_reason("pairs"))
    rng = random.Random(seed)
    out: dict[str, list[Story]] = {}
    for lang, files in SOURCES[split].items():
        found: list[Story] = []
        for name, pos, neg, k in files:
            rows = [json.loads(line) for line in (eval_data_dir() / "pairs" / name).open(encoding="utf-8")]
            for rule, dup in ((pos, True), (neg, False)):
                chosen = [r for r in rows if r.get("text1") and r.get("text2") and _rule(rule, float(r["label"]))]
                rng.shuffle(chosen)
                for i in range(0, len(chosen) - k + 1, k):
                    group = chosen[i : i + k]
                    found.append(
                        Story(lang, name.split(".")[0], _join([r["text1"] for r in group], lang),
                              _join([r["text2"] for r in group], lang), dup)
                    )
        rng.shuffle(found)
        out[lang] = found
    return out


def _boilerplate(lang: str, s: int) -> tuple[str, str]:
    if lang == "zh":
        return (f"首页 | 新闻 | 财经 | 科技 | 第{s}频道", f"版权所有 © 2026 第{s}网 未经授权禁止转载")
    return (f"Home | News | Business | Tech | Channel {s}", f"Copyright 2026 Channel {s} Media. All rights reserved.")


def _title(text: str, lang: str) -> str:
    return " ".join(text.split()[:8]) if lang == "en" else text[:16]


def plant(src: Path, dst: Path, split: str = "dev", per_hour: int = 120, seed: int = 0) -> Path:
    """Copy the generated crawl ``src`` to ``dst`` and add ``per_hour`` stories per language per hour.

    Half of them are rewrites, half same-topic negatives; each adds two documents (its source on one
    site, the other text on another site, later). About a third of the rewrites come an hour after
    their source, so the registry has to supply the candidate.
    """
    from bench.generate import TRUTH_SCHEMA

    found = stories(split, seed)
    rng = random.Random(seed + 1)
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    truth = pq.read_table(dst / "truth.parquet")
    batch_ids = sorted(set(truth.column("batch_id").to_pylist()))
    parts = {b: next(dst.glob(f"crawl/dt={b[:10]}/hour={b[11:]}/*.parquet")) for b in batch_ids}
    new_rows: dict[str, list[dict]] = {b: [] for b in batch_ids}
    new_truth: list[dict] = []
    for lang, items in found.items():
        pos = [s for s in items if s.duplicate]
        neg = [s for s in items if not s.duplicate]
        take = {True: iter(pos), False: iter(neg)}
        for h, b in enumerate(batch_ids):
            start = pc.min(pq.read_table(parts[b], columns=["fetched_at"]).column("fetched_at")).value
            for j in range(per_hour):
                story = next(take[j % 2 == 0], None)
                if story is None:
                    continue
                sid = f"rw-{split}-{lang}-{h}-{j}"
                a, c = rng.sample(range(SITES_PER_LANG), 2)
                later = story.duplicate and h + 1 < len(batch_ids) and rng.random() < 0.33
                t_src = start + rng.randrange(0, 1_800_000_000)
                t_other = (start + 3_600_000_000 + rng.randrange(0, 3_500_000_000)) if later else t_src + rng.randrange(1, 1_700_000_000)
                b_other = batch_ids[h + 1] if later else b
                for doc_id, text, site, t, batch in ((f"{sid}-a", story.source, a, t_src, b), (f"{sid}-b", story.other, c, t_other, b_other)):
                    head, foot = _boilerplate(lang, site)
                    host = f"{'zh' if lang == 'zh' else 'en'}-rewrite{site}.example"
                    new_rows[batch].append({
                        "doc_id": doc_id, "url": f"https://{host}/{doc_id}.html", "title": _title(text, lang),
                        "content": f"{head}\n{text}\n{foot}", "fetched_at": t, "lang": lang, "site": host,
                    })
                is_other_dup = story.duplicate
                new_truth.append(_truth(f"{sid}-a", b, batch_ids.index(b), lang, "original", f"{sid}-a", None, story.dataset, False, False))
                new_truth.append(_truth(
                    f"{sid}-b", b_other, batch_ids.index(b_other), lang,
                    KIND_REWORDED if is_other_dup else KIND_SAME_TOPIC,
                    f"{sid}-a" if is_other_dup else f"{sid}-b", f"{sid}-a", story.dataset, is_other_dup, not is_other_dup,
                ))
    for b, rows in new_rows.items():
        table = pq.read_table(parts[b])
        extra = pa.Table.from_pylist(
            [{**r, "fetched_at": r["fetched_at"]} for r in rows],
            schema=pa.schema([f if f.name != "fetched_at" else pa.field("fetched_at", pa.int64()) for f in table.schema]),
        )
        extra = extra.set_column(extra.schema.get_field_index("fetched_at"), "fetched_at",
                                 extra.column("fetched_at").cast(table.schema.field("fetched_at").type))
        merged = pa.concat_tables([table, extra.select(table.column_names).cast(table.schema)])
        tmp = parts[b].with_suffix(".tmp")
        pq.write_table(merged, tmp)
        tmp.replace(parts[b])
    truth = pa.concat_tables([truth, pa.Table.from_pylist(new_truth, schema=TRUTH_SCHEMA).select(truth.column_names).cast(truth.schema)])
    tmp = dst / "truth.parquet.tmp"
    pq.write_table(truth, tmp)
    tmp.replace(dst / "truth.parquet")
    return dst


def _truth(doc_id, batch_id, hour, lang, kind, cluster, source, dataset, dup, keep) -> dict:
    return {
        "doc_id": doc_id, "batch_id": batch_id, "hour": hour, "lang": lang, "kind": kind, "cluster_id": cluster,
        "source_doc_id": source, "edits": [f"pairs:{dataset}"], "true_jaccard": None, "is_duplicate": dup, "must_keep": keep,
    }
