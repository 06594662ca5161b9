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

from dataclasses import dataclass, field

import pandas as pd

from dedup_tasks.audit.metrics import threshold_passes
from dedup_tasks.audit.sampling import near_miss_rows

THRESHOLD_LAYERS = ("simhash", "minhash", "semantic")


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
    cols = ["doc_id", "batch_id", "layer", "matched_doc_id", "matched_batch_id", "score", "old_threshold",
            "new_threshold", "old_action", "new_action"]
    changes, summary = [], []
    near = near_miss_rows(decisions)
    for layer, new in sorted(thresholds.items()):
        drops = decisions[(decisions["action"] == "drop") & (decisions["layer"] == layer)]
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
        summary.append({"layer": layer, "drops_before": len(drops), "drops_after": len(drops) - len(undropped) + len(newly),
                        "newly_kept": len(undropped), "newly_dropped": len(newly)})
    kept = decisions[decisions["action"] == "keep"]
    undecidable = len(kept) - len(near)
    notes = [
        "A row the replay keeps never reached the later layers; they may still drop it.",
    ]
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
