"""Precision estimates from labels (Wilson intervals), threshold recommendations, drop rates and the
notes of kept rows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dedup_tasks.audit.sampling import CROSS_BAND, DISTANCE_LAYERS, SINGLE_BAND_LAYERS, band_order
from dedup_tasks.contract import REASON_SEPARATOR

DEFAULT_TARGET_PRECISION = 0.98
DUPLICATE = "duplicate"
NOT_DUPLICATE = "not_duplicate"
_TRUE = {"duplicate", "dup", "yes", "y", "true", "1", "1.0", "same"}
_FALSE = {"not_duplicate", "not duplicate", "not-duplicate", "no", "n", "false", "0", "0.0", "different"}


def normalize_label(value: object) -> str | None:
    """'duplicate' / 'not_duplicate' from the spellings analysts type; None for blank; ValueError otherwise."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return DUPLICATE if value else NOT_DUPLICATE
    text = str(value).strip().lower()
    if not text or text in {"nan", "none", "null"}:
        return None
    if text in _TRUE:
        return DUPLICATE
    if text in _FALSE:
        return NOT_DUPLICATE
    raise ValueError(f"label {value!r}: expected duplicate or not_duplicate")


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default); (0, 1) when n == 0.

    Wilson rather than the normal approximation: audit strata are small and precision sits near 1,
    where the normal interval collapses to a zero-width [1, 1].
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Exact ends at k == 0 and k == n (the formula gives them up to rounding).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _labelled(labels: pd.DataFrame) -> pd.DataFrame:
    out = labels.copy()
    out["label"] = out["label"].map(normalize_label)
    out = out[out["label"].notna()]
    out["is_dup"] = out["label"] == DUPLICATE
    return out


def precision_table(labels: pd.DataFrame) -> pd.DataFrame:
    """Per layer and band of labelled drops: n, duplicates, precision and its Wilson 95% interval.

    `labels` needs layer, band, kind and label; only kind == "drop" rows measure precision (a
    near miss was kept, so labelling it measures missed duplicates instead).
    """
    cols = ["layer", "band", "n", "duplicates", "precision", "low", "high"]
    if labels.empty:
        return pd.DataFrame(columns=cols)
    drops = _labelled(labels[labels["kind"] == "drop"])
    rows = []
    for (layer, band), group in drops.groupby(["layer", "band"], sort=False):
        n, k = len(group), int(group["is_dup"].sum())
        low, high = wilson_interval(k, n)
        rows.append({"layer": layer, "band": band, "n": n, "duplicates": k, "precision": k / n, "low": low, "high": high})
    table = pd.DataFrame(rows, columns=cols)
    if table.empty:
        return table
    table["_order"] = [band_order(layer, band) for layer, band in zip(table["layer"], table["band"], strict=True)]
    return table.sort_values(["layer", "_order"]).drop(columns="_order").reset_index(drop=True)


@dataclass(frozen=True)
class Recommendation:
    layer: str
    threshold: float | None
    precision: float | None
    low: float | None
    high: float | None
    labelled: int
    note: str


def _band_threshold(layer: str, band: str) -> float | None:
    """The threshold that keeps dropping this band and everything closer (None: not a usable edge)."""
    if band.startswith("d="):
        return float(band[2:])
    if band.startswith("<") or band in ("all", CROSS_BAND):
        return None
    return float(band.split("-")[0])


def recommend_thresholds(
    labels: pd.DataFrame, populations: pd.DataFrame, target: float = DEFAULT_TARGET_PRECISION
) -> dict[str, Recommendation]:
    """Per layer, the loosest band edge whose estimated precision of the drops it implies is >= target.

    `labels`: layer, band, kind, label. `populations`: layer, band, count (how many decisions of the
    week fall in each band, drops and near misses alike). The estimate for a threshold pools the
    bands it would drop, each band's labelled precision weighted by its population (the sample is
    stratified, so a plain pooled mean would over-weight small bands); its interval is Wilson's on
    the pooled labelled count, an approximation. A band without labels makes every looser threshold
    unknowable, so the search stops there.
    """
    out: dict[str, Recommendation] = {}
    lab = _labelled(labels) if not labels.empty else pd.DataFrame(columns=["layer", "band", "is_dup"])
    for layer in sorted(set(populations["layer"].dropna()) | set(lab["layer"].dropna())):
        if layer in SINGLE_BAND_LAYERS:
            out[layer] = Recommendation(layer, None, None, None, None, int((lab["layer"] == layer).sum()),
                                        "no threshold: an exact key either matches or not")
            continue
        pop = populations[populations["layer"] == layer].groupby("band")["count"].sum()
        by_band = lab[lab["layer"] == layer].groupby("band")["is_dup"].agg(["sum", "count"])
        bands = sorted(
            (b for b in set(pop.index) | set(by_band.index) if _band_threshold(layer, b) is not None),
            key=lambda b: band_order(layer, b),
        )
        best: Recommendation | None = None
        weight = hits = 0.0
        n_total = k_total = 0
        for band in bands:
            if band not in by_band.index or by_band.loc[band, "count"] == 0:
                break
            n_b, k_b = int(by_band.loc[band, "count"]), int(by_band.loc[band, "sum"])
            w = float(pop.get(band, 0)) or float(n_b)
            weight += w
            hits += w * k_b / n_b
            n_total += n_b
            k_total += k_b
            p = hits / weight
            low, high = wilson_interval(round(p * n_total), n_total)
            if p >= target:
                best = Recommendation(layer, _band_threshold(layer, band), p, low, high, n_total,
                                      f"loosest labelled band edge with precision >= {target:.2f}")
        if best is None:
            note = ("no labelled band reaches the target precision" if n_total
                    else "no labels yet for this layer")
            best = Recommendation(layer, None, None, None, None, n_total, note)
        out[layer] = best
    return out


def band_populations(decisions: pd.DataFrame, near: pd.DataFrame) -> pd.DataFrame:
    """How many drops (and recorded near misses) of the week fall in each layer and band."""
    from dedup_tasks.audit.sampling import bands_of

    frames = []
    for kind, rows in (("drop", decisions[decisions["action"] == "drop"]), ("near_miss", near)):
        if rows.empty:
            continue
        bands = bands_of(rows)
        frames.append(pd.DataFrame({"kind": kind, "layer": rows["layer"].to_numpy(), "band": bands}))
    if not frames:
        return pd.DataFrame(columns=["kind", "layer", "band", "count"])
    all_rows = pd.concat(frames, ignore_index=True)
    return all_rows.groupby(["kind", "layer", "band"]).size().reset_index(name="count")


def drop_rates(decisions: pd.DataFrame, by: str) -> pd.DataFrame:
    """Rows, drops and drop rate per value of `by` (hour, site, lang), with one column per layer."""
    if decisions.empty:
        return pd.DataFrame(columns=[by, "rows", "dropped", "rate"])
    frame = decisions.assign(dropped=(decisions["action"] == "drop").astype(int))
    base = frame.groupby(by).agg(rows=("doc_id", "size"), dropped=("dropped", "sum"))
    per_layer = (
        frame[frame["action"] == "drop"].groupby([by, "layer"]).size().unstack(fill_value=0)
        if frame["dropped"].any()
        else pd.DataFrame(index=base.index)
    )
    out = base.join(per_layer, how="left").fillna(0)
    out["rate"] = out["dropped"] / out["rows"]
    return out.reset_index()


def kept_notes(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per note on a kept row's decision (its reason, split at ``REASON_SEPARATOR``): how many kept rows of the week
    carry it, in how many hours, and the hour with most of them (the earliest on a tie). A note says
    why a row was kept (an update of a known URL) or what was not tested (a candidate left unread over
    a budget, a text too long to compare whole), so analysts see how often a row escaped the full cascade."""
    columns = ["note", "rows", "hours", "busiest hour", "rows that hour"]
    if decisions.empty or "reason" not in decisions:
        return pd.DataFrame(columns=columns)
    kept = decisions[(decisions["action"] == "keep") & decisions["reason"].notna()]
    notes = kept.assign(note=kept["reason"].astype(str).str.split(REASON_SEPARATOR, regex=False)).explode("note")
    notes = notes[notes["note"].str.len() > 0].drop_duplicates(["doc_id", "hour", "note"])
    if notes.empty:
        return pd.DataFrame(columns=columns)
    per_hour = notes.groupby(["note", "hour"]).size().reset_index(name="n")
    busiest = per_hour.sort_values(["note", "n", "hour"], ascending=[True, False, True]).drop_duplicates("note")
    out = per_hour.groupby("note").agg(rows=("n", "sum"), hours=("hour", "size")).join(
        busiest.set_index("note")[["hour", "n"]].rename(columns={"hour": "busiest hour", "n": "rows that hour"}))
    return out.reset_index().sort_values(["rows", "note"], ascending=[False, True])[columns].reset_index(drop=True)


def threshold_passes(layer: str, score: float, threshold: float) -> bool:
    """Would a layer drop at `score` under `threshold`? (distance: <=, similarity: >=)."""
    return score <= threshold if layer in DISTANCE_LAYERS else score >= threshold
