"""Reading a week of decisions and drawing the analysts' stratified, reproducible sample.

Strata are (kind, layer, score band): kind "drop" for documents a layer dropped, "near_miss" for
kept documents whose best candidate fell just short of the threshold. Each stratum is sampled on its
own generator seeded by (week, stratum), so a new stratum or a changed cap elsewhere never reshuffles
the others and the same week always gives the same sample.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from dedup_tasks.audit.weeks import decision_partitions
from dedup_tasks.contract import CROSS_SCORE_KINDS
from dedup_tasks.io import partition_of

# Score bands per layer: SimHash is a Hamming distance (lower = closer, drop at <= threshold);
# MinHash (Jaccard) and semantic (cosine) are similarities (drop at >= threshold).
SIMILARITY_EDGES: dict[str, list[float]] = {
    "minhash": [0.8, 0.85, 0.9, 0.95, 1.0],
    "semantic": [0.92, 0.94, 0.96, 0.98, 1.0],
}
DISTANCE_LAYERS = {"simhash"}
SINGLE_BAND_LAYERS = {"url", "exact"}
DEFAULT_PER_STRATUM = 20
DEFAULT_NEAR_MISS_PER_LAYER = 20

# Columns the cascade may one day write for kept rows (its best below-threshold candidate). Read when
# present; today the decisions leave score/matched_* empty on keeps, so near misses cannot be sampled.
SUSPECT_COLUMNS = ("suspect_layer", "suspect_doc_id", "suspect_batch_id", "suspect_score")

SAMPLE_COLUMNS = [
    "sample_id", "week", "kind", "layer", "band", "batch_id", "doc_id", "matched_batch_id",
    "matched_doc_id", "score", "threshold", "reason", "site", "lang", "url", "matched_url",
    "title", "matched_title", "text", "matched_text", "label",
]  # fmt: skip


def higher_is_closer(layer: str) -> bool:
    return layer not in DISTANCE_LAYERS


# L4 drops a cross-encoder confirmed score a logit (or probability and cosine), not a cosine: one
# band of their own, no edge a cosine threshold could be read from.
CROSS_BAND = "cross-encoder"


def band_of(layer: str | None, score: float | None, score_kind: str | None = None) -> str:
    """The score band label of one decision (see the module docstring)."""
    if score_kind in CROSS_SCORE_KINDS:
        return CROSS_BAND
    if layer is None or layer in SINGLE_BAND_LAYERS or score is None or pd.isna(score):
        return "all"
    if layer in DISTANCE_LAYERS:
        return f"d={int(round(score))}"
    edges = SIMILARITY_EDGES.get(layer)
    if edges is None:
        return "all"
    if score < edges[0]:
        return f"<{edges[0]:.2f}"
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if score < hi:
            return f"{lo:.2f}-{hi:.2f}"
    return f"{edges[-2]:.2f}-{edges[-1]:.2f}"


def bands_of(rows: pd.DataFrame) -> list[str]:
    """``band_of`` of every decision row (its score_kind, where the decisions have one)."""
    kinds = rows["score_kind"] if "score_kind" in rows.columns else [None] * len(rows)
    return [band_of(layer, score, kind if isinstance(kind, str) else None)
            for layer, score, kind in zip(rows["layer"], rows["score"], kinds, strict=True)]


def band_order(layer: str, band: str) -> tuple[int, float]:
    """Sort key: bands from the closest (most certain) to the loosest."""
    if band == "all":
        return (0, 0.0)
    if band == CROSS_BAND:
        return (2, 0.0)
    if band.startswith("d="):
        return (0, float(band[2:]))
    if band.startswith("<"):
        return (1, 0.0)
    return (0, -float(band.split("-")[0]))


def load_week_decisions(root: Path | str, week: str) -> pd.DataFrame:
    """All decisions of the hours whose dt falls in `week`, with `hour` (the batch id) added."""
    frames = []
    for batch_id, part in decision_partitions(root, week):
        frame = pq.read_table(part).to_pandas()
        frame["hour"] = batch_id
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["doc_id", "batch_id", "action", "layer", "matched_doc_id",
                                     "matched_batch_id", "score", "threshold", "reason", "config_hash", "hour"])
    return pd.concat(frames, ignore_index=True)


def site_of(url: object) -> str:
    if not isinstance(url, str) or not url:
        return "(no url)"
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return "(unparsable)"
    return host.removeprefix("www.") if host else "(unparsable)"


def read_crawl(root: Path | str, batch_ids: list[str], columns: list[str], doc_ids: set[str] | None = None) -> pd.DataFrame:
    """Selected columns of the crawl partitions of `batch_ids` (missing partitions are skipped)."""
    frames = []
    for batch_id in sorted(set(batch_ids)):
        part = Path(root) / "crawl" / partition_of(batch_id)
        files = sorted(p for p in part.glob("*.parquet") if not p.name.startswith((".", "_")))
        for file in files:
            schema = pq.read_schema(file)
            cols = [c for c in columns if c in schema.names]
            frame = pq.read_table(file, columns=cols).to_pandas()
            for c in columns:
                if c not in frame:
                    frame[c] = None
            if doc_ids is not None:
                frame = frame[frame["doc_id"].isin(doc_ids)]
            frame["batch_id"] = batch_id
            frames.append(frame[[*columns, "batch_id"]])
    if not frames:
        return pd.DataFrame(columns=[*columns, "batch_id"])
    return pd.concat(frames, ignore_index=True)


def with_site_lang(root: Path | str, decisions: pd.DataFrame) -> pd.DataFrame:
    """Decisions plus `site` (host of the URL) and `lang` from the crawl partitions."""
    meta = read_crawl(root, decisions["batch_id"].dropna().unique().tolist(), ["doc_id", "url", "lang"])
    out = decisions.merge(meta, on=["batch_id", "doc_id"], how="left")
    out["site"] = out["url"].map(site_of)
    out["lang"] = out["lang"].fillna("unknown")
    return out


def near_miss_rows(decisions: pd.DataFrame) -> pd.DataFrame:
    """Kept rows that carry a best candidate and its score: the only near misses the data can show."""
    kept = decisions[decisions["action"] == "keep"]
    if all(c in decisions for c in SUSPECT_COLUMNS):
        rows = kept[kept["suspect_doc_id"].notna() & kept["suspect_score"].notna()].copy()
        rows["layer"] = rows["suspect_layer"]
        rows["matched_doc_id"] = rows["suspect_doc_id"]
        rows["matched_batch_id"] = rows["suspect_batch_id"]
        rows["score"] = rows["suspect_score"]
        return rows
    return kept[kept["matched_doc_id"].notna() & kept["score"].notna() & kept["layer"].notna()].copy()


def _seed(week: str, stratum: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{week}|{stratum}".encode()).digest()[:8], "big")


def _draw(rows: pd.DataFrame, n: int, week: str, stratum: str) -> pd.DataFrame:
    # Sort first: the draw must not depend on file or row order of the inputs.
    rows = rows.sort_values(["batch_id", "doc_id"], kind="stable").reset_index(drop=True)
    if len(rows) <= n:
        return rows
    rng = np.random.default_rng(_seed(week, stratum))
    picked = np.sort(rng.choice(len(rows), size=n, replace=False))
    return rows.iloc[picked].reset_index(drop=True)


def draw_sample(
    decisions: pd.DataFrame,
    week: str,
    per_stratum: int = DEFAULT_PER_STRATUM,
    near_miss_per_layer: int = DEFAULT_NEAR_MISS_PER_LAYER,
) -> pd.DataFrame:
    """Stratified sample of drops (per layer and band) and near misses (per layer and band), no texts yet."""
    drops = decisions[decisions["action"] == "drop"].copy()
    drops["kind"] = "drop"
    near = near_miss_rows(decisions)
    near["kind"] = "near_miss"
    parts = []
    for kind, rows, cap in (("drop", drops, per_stratum), ("near_miss", near, near_miss_per_layer)):
        if rows.empty:
            continue
        rows = rows.copy()
        rows["band"] = bands_of(rows)
        for (layer, band), group in rows.groupby(["layer", "band"], sort=True):
            parts.append(_draw(group, cap, week, f"{kind}/{layer}/{band}"))
    if not parts:
        return pd.DataFrame(columns=SAMPLE_COLUMNS)
    sample = pd.concat(parts, ignore_index=True)
    sample["week"] = week
    sample["sample_id"] = sample["batch_id"] + ":" + sample["doc_id"]
    return sample


def attach_texts(sample: pd.DataFrame, root: Path | str) -> pd.DataFrame:
    """Both sides of each pair from the crawl: the document from its batch, the match from its own batch."""
    cols = ["doc_id", "url", "title", "content", "lang"]
    out = sample.copy()
    docs = read_crawl(root, out["batch_id"].tolist(), cols, set(out["doc_id"]))
    out = out.drop(columns=[c for c in ("url", "lang", "site") if c in out]).merge(
        docs.rename(columns={"content": "text"}), on=["batch_id", "doc_id"], how="left"
    )
    has_match = out["matched_doc_id"].notna() & out["matched_batch_id"].notna()
    matched = read_crawl(
        root, out.loc[has_match, "matched_batch_id"].tolist(), cols[:4], set(out.loc[has_match, "matched_doc_id"])
    ).rename(
        columns={
            "batch_id": "matched_batch_id",
            "doc_id": "matched_doc_id",
            "url": "matched_url",
            "title": "matched_title",
            "content": "matched_text",
        }
    )
    out = out.merge(matched, on=["matched_batch_id", "matched_doc_id"], how="left")
    out["site"] = out["url"].map(site_of)
    out["lang"] = out["lang"].fillna("unknown")
    out["label"] = pd.Series([None] * len(out), dtype="object")
    for c in SAMPLE_COLUMNS:
        if c not in out:
            out[c] = None
    return out[SAMPLE_COLUMNS]
