"""What-if: replay a past week's decisions under other thresholds, from the stored scores only.

No fingerprint is recomputed: each drop carries the score of the match that dropped it, so a
tighter threshold can be decided row by row (a drop whose score no longer passes stops being a drop
*of that layer*). The limits, stated in every result:

- A document the replay un-drops never reached the later layers, which might still drop it; and it
  becomes a candidate other documents could match. The replay reports it as "keep (this layer)".
- A looser threshold needs the best below-threshold candidate of kept documents. The decisions carry
  it only when the cascade records near misses (score/matched_* on keeps, or suspect_* columns);
  otherwise a loosened layer's new drops are not visible and the result says how many keeps were
  not decidable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from dedup_tasks.audit.metrics import threshold_passes
from dedup_tasks.audit.sampling import near_miss_rows
from dedup_tasks.contract import CROSS_SCORE_KINDS

THRESHOLD_LAYERS = ("simhash", "minhash", "semantic")
# The values a replayed threshold may take: a Hamming distance of 64-bit SimHashes, a Jaccard, a cosine.
THRESHOLD_RANGES: dict[str, tuple[float, float]] = {"simhash": (0, 64), "minhash": (0.0, 1.0), "semantic": (-1.0, 1.0)}


class ThresholdError(ValueError):
    """A what-if threshold that is not a finite number in its layer's range; names the parameter."""


def parse_thresholds(values: Mapping[str, str]) -> dict[str, float]:
    """{layer: threshold} from form/query values; blanks and other keys are ignored.

    ``float()`` accepts "nan" and "inf": a NaN threshold passes nothing and an infinite one everything,
    so both are refused here, as is anything outside the layer's range.
    """
    out: dict[str, float] = {}
    for layer in THRESHOLD_LAYERS:
        raw = values.get(layer)
        if raw is None or not str(raw).strip():
            continue
        try:
            value = float(raw)
        except ValueError as exc:
            raise ThresholdError(f"threshold {layer}={raw!r} is not a number") from exc
        lo, hi = THRESHOLD_RANGES[layer]
        if not math.isfinite(value):
            raise ThresholdError(f"threshold {layer}={raw!r} must be a finite number")
        if not lo <= value <= hi:
            raise ThresholdError(f"threshold {layer}={raw!r} must be in [{lo:g}, {hi:g}]")
        out[layer] = value
    return out


@dataclass
class WhatIfResult:
    thresholds: dict[str, float]
    changes: pd.DataFrame  # doc_id, batch_id, layer, score, old_threshold, new_threshold, old_action, new_action
    per_layer: pd.DataFrame  # layer, drops_before, drops_after, newly_kept, newly_dropped
    undecidable_keeps: int
    notes: list[str] = field(default_factory=list)


def replay(decisions: pd.DataFrame, thresholds: dict[str, float]) -> WhatIfResult:
    """Decisions that would change under `thresholds` ({layer: threshold}; others unchanged)."""
    unknown = sorted(set(thresholds) - set(THRESHOLD_LAYERS))
    if unknown:
        raise ValueError(f"what-if thresholds for {unknown}: only {list(THRESHOLD_LAYERS)} have one")
    parse_thresholds({k: str(v) for k, v in thresholds.items()})  # the same checks for library callers
    cols = ["doc_id", "batch_id", "layer", "matched_doc_id", "matched_batch_id", "score", "old_threshold",
            "new_threshold", "old_action", "new_action"]
    changes, summary = [], []
    near = near_miss_rows(decisions)
    # A cross-encoder's drop scores a logit (or probability and cosine): a cosine threshold cannot
    # replay it, so it stays a drop.
    kinds = decisions["score_kind"] if "score_kind" in decisions.columns else pd.Series(None, index=decisions.index)
    by_cross = kinds.isin(CROSS_SCORE_KINDS).to_numpy()
    for layer, new in sorted(thresholds.items()):
        of_layer = (decisions["action"] == "drop") & (decisions["layer"] == layer)
        drops = decisions[of_layer & ~by_cross]
        before = int(of_layer.sum())
        still = [threshold_passes(layer, s, new) for s in drops["score"]]
        undropped = drops[[not s for s in still]]
        candidates = near[near["layer"] == layer]
        newly = candidates[[threshold_passes(layer, s, new) for s in candidates["score"]]]
        for frame, old_action, new_action in ((undropped, "drop", "keep"), (newly, "keep", "drop")):
            if frame.empty:
                continue
            part = frame.assign(old_threshold=frame["threshold"], new_threshold=new,
                                old_action=old_action, new_action=new_action)
            changes.append(part[cols])
        summary.append({"layer": layer, "drops_before": before, "drops_after": before - len(undropped) + len(newly),
                        "newly_kept": len(undropped), "newly_dropped": len(newly)})
    kept = decisions[decisions["action"] == "keep"]
    undecidable = len(kept) - len(near)
    notes = [
        "A row the replay keeps never reached the later layers; they may still drop it.",
    ]
    cross_drops = int((by_cross & (decisions["layer"] == "semantic").to_numpy()).sum())
    if "semantic" in thresholds and cross_drops:
        notes.append(
            f"{cross_drops} semantic drops confirmed by a cross-encoder score on its own scale, not a cosine: "
            "they are not replayed (their threshold is semantic_cross_threshold_<lang>)."
        )
    if undecidable and any(_loosens(layer, new, decisions) for layer, new in thresholds.items()):
        notes.append(
            f"{undecidable} kept rows carry no near-miss score: a looser threshold's new drops among them "
            "cannot be replayed (the cascade does not record kept rows' best candidates yet)."
        )
    return WhatIfResult(
        thresholds=dict(thresholds),
        changes=pd.concat(changes, ignore_index=True) if changes else pd.DataFrame(columns=cols),
        per_layer=pd.DataFrame(summary, columns=["layer", "drops_before", "drops_after", "newly_kept", "newly_dropped"]),
        undecidable_keeps=undecidable,
        notes=notes,
    )


def _loosens(layer: str, new: float, decisions: pd.DataFrame) -> bool:
    old = decisions.loc[decisions["layer"] == layer, "threshold"].dropna()
    if old.empty:
        return True
    current = float(old.iloc[0])
    return new > current if layer == "simhash" else new < current
