"""Labels -> thresholds: the `DEDUP_CONFIG` overlay `audit recommend` writes (docs/audit.md).

For each threshold layer (SimHash distance, MinHash Jaccard, semantic cosine) and language, every
labelled pair of the chosen weeks (labelled drops and labelled near misses alike) is a point (score,
duplicate?). A candidate threshold drops the labelled pairs on its near side; its precision is the
share of them labelled "duplicate", with a Wilson 95% interval. The recommendation is the threshold
that drops the most while the interval's lower bound stays >= the target: "not a duplicate" labels in
a layer's loosest band tighten it, "duplicate" labels on near misses loosen it.

The estimate counts labelled pairs as drawn (drops and near misses are sampled per band, so bands
weigh by their sample, not their population); the overlay says how many labels each setting rests on
and leaves out a setting with fewer than MIN_LABELS. Each setting carries a what-if replay of the
labelled weeks (whatif.replay: stored scores, no fingerprint recomputed): the decisions that would
change, per layer and hour, so the hours to rerun are named.

Only settings the configuration has are written: one SimHash and one MinHash threshold for every
language (per-language figures are comments), semantic_threshold_<lang> where that field exists.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dedup_tasks.audit.metrics import DUPLICATE, normalize_label, wilson_interval
from dedup_tasks.audit.sampling import CROSS_BAND, DISTANCE_LAYERS, load_week_decisions, with_site_lang
from dedup_tasks.audit.weeks import audit_dir, parse_week
from dedup_tasks.audit.whatif import THRESHOLD_LAYERS, replay
from dedup_tasks.contract import CROSS_SCORE_KINDS
from dedup_tasks.io import InputError

DEFAULT_TARGET = 0.95
MIN_LABELS = 10  # labelled pairs below which a setting is left out: Wilson's bound at n=10 is >= 0.72 at best
LAYER_SETTING = {"simhash": "simhash_max_distance", "minhash": "minhash_threshold", "semantic": "semantic_threshold"}


class RecommendError(InputError):
    """A week without a written audit: the message names the week and its folder."""


@dataclass
class Recommendation:
    """One setting of the overlay (value None: left out, `note` says why)."""

    setting: str
    layer: str
    languages: list[str]
    current: float | None
    value: float | None
    labels: int = 0
    drops: int = 0
    near_misses: int = 0
    duplicates: int = 0
    dropped: int = 0  # labelled pairs the recommended threshold drops
    dropped_duplicates: int = 0
    low: float | None = None
    high: float | None = None
    note: str = ""
    per_language: dict[str, str] = field(default_factory=dict)
    changes: pd.DataFrame = field(default_factory=pd.DataFrame)  # layer, hour, drop_to_keep, keep_to_drop

    @property
    def changed(self) -> bool:
        return self.value is not None and (self.current is None or not math.isclose(self.value, self.current))

    @property
    def hours(self) -> list[str]:
        return sorted(self.changes["hour"].unique().tolist()) if not self.changes.empty else []

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("setting", "layer", "languages", "current", "value", "labels", "drops",
                                             "near_misses", "duplicates", "dropped", "dropped_duplicates", "low",
                                             "high", "note", "per_language")}
        out["changes"] = json.loads(self.changes.to_json(orient="records")) if not self.changes.empty else []
        return out


@dataclass
class RecommendResult:
    weeks: list[str]
    target: float
    recommendations: list[Recommendation]
    labels: int

    @property
    def overlay(self) -> dict[str, float | int]:
        return {r.setting: _typed(r.setting, r.value) for r in self.recommendations if r.changed}

    @property
    def hours(self) -> list[str]:
        return sorted({h for r in self.recommendations if r.changed for h in r.hours})


def _typed(setting: str, value: float | None) -> Any:
    return int(value) if setting == "simhash_max_distance" and value is not None else value


# ---------------------------------------------------------------------------------------- labels
def labelled_pairs(root: Path | str, weeks: list[str], labels: pd.DataFrame) -> pd.DataFrame:
    """Labels of `weeks` joined to their week's sample (language, score, hour); only threshold layers."""
    cols = ["week", "sample_id", "kind", "layer", "band", "score", "lang", "hour", "is_dup"]
    frames = []
    for week in weeks:
        sample_path = audit_dir(root, week) / "sample.parquet"
        if not sample_path.exists():
            raise RecommendError(f"no audit for week {week} under {audit_dir(root, week)} (run `audit --week {week}`)")
        sample = pd.read_parquet(sample_path, columns=["sample_id", "kind", "layer", "band", "score", "lang", "batch_id"])
        mine = labels[labels["week"] == week][["sample_id", "label"]]
        frames.append(sample.merge(mine, on="sample_id", how="inner").assign(week=week))
    if not frames:
        return pd.DataFrame(columns=cols)
    pairs = pd.concat(frames, ignore_index=True)
    pairs["label"] = pairs["label"].map(normalize_label)
    pairs = pairs[pairs["label"].notna() & pairs["layer"].isin(THRESHOLD_LAYERS) & pairs["score"].notna()
                  & (pairs["band"] != CROSS_BAND)]
    pairs = pairs.assign(is_dup=pairs["label"] == DUPLICATE, hour=pairs["batch_id"], lang=pairs["lang"].fillna("unknown"))
    return pairs[cols].reset_index(drop=True)


# ---------------------------------------------------------------------------------------- search
@dataclass(frozen=True)
class Search:
    threshold: float
    dropped: int
    duplicates: int
    low: float
    high: float


def best_threshold(scores: np.ndarray, is_dup: np.ndarray, distance: bool, target: float) -> Search | None:
    """The threshold dropping the most labelled pairs whose Wilson lower bound of precision is >= target.

    Candidates are the labelled scores themselves (between two of them nothing labelled changes). A
    distance drops at <= t, a similarity at >= t; a similarity is written rounded down (3 to 6
    decimals) while it stays above the next looser labelled score.
    """
    scores = np.asarray(scores, float)
    is_dup = np.asarray(is_dup, bool)
    if distance:
        scores = np.round(scores)
    order = np.argsort(scores if distance else -scores, kind="stable")  # closest first
    s, d = scores[order], is_dup[order]
    values, starts = np.unique(s if distance else -s, return_index=True)
    ends = np.append(starts[1:], len(s))  # the pairs with score == values[i] end at ends[i]
    n = ends
    k = np.cumsum(d)[ends - 1]
    best = None
    for i in range(len(values)):
        low, high = wilson_interval(int(k[i]), int(n[i]))
        if low >= target:
            best = i
    if best is None:
        return None
    low, high = wilson_interval(int(k[best]), int(n[best]))
    if distance:
        return Search(float(values[best]), int(n[best]), int(k[best]), low, high)
    value = float(-values[best])
    looser = float(-values[best + 1]) if best + 1 < len(values) else -math.inf
    return Search(_short_value(value, looser), int(n[best]), int(k[best]), low, high)


def _short_value(value: float, looser: float) -> float:
    """`value` rounded down to the fewest decimals (3 to 6) that stay above `looser`: a threshold in the
    gap between two labelled scores, not on a score (a rerun's float may differ in its last bits)."""
    for decimals in range(3, 7):
        step = 10.0**-decimals
        rounded = round(math.floor(value / step + 1e-9) * step, decimals)
        if looser < rounded <= value:
            return rounded
    return value


def _current(decisions: pd.DataFrame, layer: str, langs: list[str] | None) -> float | None:
    rows = decisions[(decisions["layer"] == layer) & decisions["threshold"].notna()]
    if langs is not None and "lang" in rows:
        rows = rows[rows["lang"].isin(langs)]
    if "score_kind" in rows:
        rows = rows[~rows["score_kind"].isin(list(CROSS_SCORE_KINDS))]
    if rows.empty:
        return None
    return float(rows.sort_values("hour")["threshold"].iloc[-1])


def _setting_groups(pairs: pd.DataFrame) -> list[tuple[str, str, list[str] | None]]:
    """(setting, layer, languages or None for all) of every setting the labels could inform."""
    from dedup_tasks.config import DedupConfig

    fields = set(DedupConfig.__dataclass_fields__)
    groups: list[tuple[str, str, list[str] | None]] = []
    for layer in THRESHOLD_LAYERS:
        of_layer = pairs[pairs["layer"] == layer]
        if of_layer.empty:
            continue
        if layer != "semantic":
            groups.append((LAYER_SETTING[layer], layer, None))
            continue
        langs = sorted(of_layer["lang"].unique())
        own = [lang for lang in langs if f"semantic_threshold_{lang}" in fields]
        groups.extend((f"semantic_threshold_{lang}", layer, [lang]) for lang in own)
        rest = [lang for lang in langs if lang not in own]
        if rest:
            groups.append(("semantic_threshold", layer, rest))
    return groups


def recommend(root: Path | str, weeks: list[str], labels: pd.DataFrame, target: float = DEFAULT_TARGET) -> RecommendResult:
    """The overlay for `weeks` from `labels` (the label store's rows of those weeks)."""
    from dedup_tasks.config import ConfigError, DedupConfig

    if not 0.0 < target < 1.0:
        raise ConfigError(f"--target {target!r}: a precision in (0, 1)")
    for week in weeks:
        parse_week(week)
    pairs = labelled_pairs(root, weeks, labels)
    decisions = pd.concat([load_week_decisions(root, w) for w in weeks], ignore_index=True)
    groups = _setting_groups(pairs)
    if any(layer == "semantic" for _, layer, _ in groups) and not decisions.empty:
        decisions = with_site_lang(root, decisions)
    recs = []
    for setting, layer, langs in groups:
        mine = pairs[(pairs["layer"] == layer) & (pairs["lang"].isin(langs) if langs is not None else True)]
        rec = Recommendation(setting, layer, langs or sorted(mine["lang"].unique()), _current(decisions, layer, langs),
                             None, labels=len(mine), drops=int((mine["kind"] == "drop").sum()),
                             near_misses=int((mine["kind"] == "near_miss").sum()), duplicates=int(mine["is_dup"].sum()))
        if langs is None:  # one setting for every language: each language's own figure, as a comment
            for lang, group in mine.groupby("lang"):
                rec.per_language[lang] = _describe_search(group, layer, target)
        if len(mine) < MIN_LABELS:
            rec.note = f"left out: {len(mine)} labelled pairs, fewer than {MIN_LABELS}"
            recs.append(rec)
            continue
        found = best_threshold(mine["score"].to_numpy(), mine["is_dup"].to_numpy(), layer in DISTANCE_LAYERS, target)
        if found is None:
            rec.note = (f"left out: no threshold keeps the lower bound of precision >= {target:g} over these labels "
                        "(label more pairs of the closest bands)")
            recs.append(rec)
            continue
        rec.value, rec.dropped, rec.dropped_duplicates = found.threshold, found.dropped, found.duplicates
        rec.low, rec.high = found.low, found.high
        try:
            DedupConfig.from_mapping({setting: _typed(setting, rec.value)})
        except ConfigError as exc:
            rec.note = f"left out: {exc}"
            rec.value = None
            recs.append(rec)
            continue
        if rec.changed:
            scope = decisions if langs is None or "lang" not in decisions else decisions[decisions["lang"].isin(langs)]
            rec.changes = _changes(scope, layer, rec.value)
            rec.note = "changes the threshold"
        else:
            rec.note = "the labels confirm the current threshold"
        recs.append(rec)
    return RecommendResult(list(weeks), target, recs, int(len(pairs)))


def _describe_search(group: pd.DataFrame, layer: str, target: float) -> str:
    if len(group) < MIN_LABELS:
        return f"too few labels ({len(group)})"
    found = best_threshold(group["score"].to_numpy(), group["is_dup"].to_numpy(), layer in DISTANCE_LAYERS, target)
    if found is None:
        return f"no threshold reaches the target ({len(group)} labels)"
    return (f"{found.threshold:g} ({len(group)} labels; {found.duplicates}/{found.dropped} dropped are duplicates, "
            f"[{found.low:.3f}, {found.high:.3f}])")


def _changes(decisions: pd.DataFrame, layer: str, value: float) -> pd.DataFrame:
    """Per hour, the decisions the replay changes under `layer` = `value` (whatif.replay)."""
    cols = ["layer", "hour", "drop_to_keep", "keep_to_drop"]
    if decisions.empty:
        return pd.DataFrame(columns=cols)
    changes = replay(decisions, {layer: value}).changes
    if changes.empty:
        return pd.DataFrame(columns=cols)
    changes = changes.assign(hour=changes["batch_id"], dk=changes["new_action"] == "keep", kd=changes["new_action"] == "drop")
    out = changes.groupby("hour").agg(drop_to_keep=("dk", "sum"), keep_to_drop=("kd", "sum")).reset_index()
    return out.assign(layer=layer)[cols].astype({"drop_to_keep": int, "keep_to_drop": int})


# ---------------------------------------------------------------------------------------- overlay
def overlay_text(result: RecommendResult, command: str, root: Path | str = "ROOT") -> str:
    """The overlay YAML: settings with their labels, interval and what-if as comments."""
    lines = [
        "# DEDUP_CONFIG overlay from audit labels: review it before applying (docs/audit.md).",
        f"# {command}",
        f"# generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} from {result.labels} labelled pairs of "
        f"{', '.join(result.weeks)}; target: Wilson 95% lower bound of precision >= {result.target:g}",
        "# new hours: DEDUP_CONFIG=<deployment.yaml>:<this file> (later files win), or `run --set KEY=VALUE`",
        "",
    ]
    for rec in result.recommendations:
        lines.extend(_setting_comment(rec))
        if rec.changed:
            lines.append(f"{rec.setting}: {_yaml_value(rec.setting, rec.value)}")
        lines.append("")
    hours = result.hours
    if hours:
        sets = " ".join(f"--set {k}={_yaml_value(k, v)}" for k, v in result.overlay.items())
        conf = json.dumps(result.overlay)
        lines.append(f"# rerun the affected hours, oldest first ({len(hours)}):")
        lines.extend(f"#   python -m dedup_tasks run --root {root} --batch {h} {sets}" for h in hours)
        lines.append("# or trigger crawl_dedup in the Airflow UI once per hour with the Params")
        lines.append(f"#   {{\"batch_hour\": \"{hours[0]}\", {conf[1:]}")
    elif not result.overlay:
        lines.append("# nothing to change: no setting has labels that move it")
    return "\n".join(lines).rstrip() + "\n"


def _yaml_value(setting: str, value: float | None) -> str:
    typed = _typed(setting, value)
    return str(typed) if isinstance(typed, int) else repr(float(typed))  # type: ignore[arg-type]


def _setting_comment(rec: Recommendation) -> list[str]:
    scope = "all languages" if rec.setting in ("simhash_max_distance", "minhash_threshold") else ", ".join(rec.languages)
    now = "unset" if rec.current is None else f"{rec.current:g}"
    head = f"# {rec.setting} ({rec.layer}, {scope}): "
    if rec.value is None:
        out = [head + f"{now}, {rec.note}"]
    else:
        out = [head + f"{now} -> {rec.value:g}" if rec.changed else head + f"{now} ({rec.note})"]
    out.append(f"#   labels: {rec.labels} ({rec.drops} drops, {rec.near_misses} near misses), {rec.duplicates} say duplicate")
    if rec.value is not None:
        out.append(f"#   at {rec.value:g}: {rec.dropped} labelled pairs dropped, {rec.dropped_duplicates} duplicates, "
                   f"precision {rec.dropped_duplicates / rec.dropped:.3f}, Wilson 95% [{rec.low:.3f}, {rec.high:.3f}]")
    for lang, text in sorted(rec.per_language.items()):
        out.append(f"#   {lang} alone: {text}")
    if rec.changed:
        if rec.changes.empty:
            out.append("#   what-if on the labelled weeks: no stored decision changes")
        else:
            total_dk, total_kd = int(rec.changes["drop_to_keep"].sum()), int(rec.changes["keep_to_drop"].sum())
            out.append(f"#   what-if on the labelled weeks: {total_dk + total_kd} decisions change "
                       f"({total_dk} drop -> keep, {total_kd} keep -> drop), per hour:")
            out.extend(f"#     {r.layer} {r.hour}: {r.drop_to_keep} drop -> keep, {r.keep_to_drop} keep -> drop"
                       for r in rec.changes.itertuples())
    return out


def write_overlay(result: RecommendResult, out: Path | str, command: str, root: Path | str = "ROOT") -> Path:
    """Write the overlay (temporary file in the same folder, then renamed) and check DedupConfig reads it."""
    import yaml

    from dedup_tasks.config import DedupConfig

    out = Path(out)
    text = overlay_text(result, command, root)
    parsed = yaml.safe_load(text) or {}
    DedupConfig.from_mapping(parsed)  # what DEDUP_CONFIG and `run --set` will do with it
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out
