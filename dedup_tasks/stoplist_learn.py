"""Learn the registry's stoplist (``fingerprint.stoplist``) from a sample of the crawl.

A stoplist keys the registry. By default (``minhash_registry_stoplist="auto"``) a new registry learns
one by itself from its first batch's English pages, with the same learner; this command is for keying a
new registry on a sample you choose (or one whose first batch is too small to learn from):
learn it from English pages of the crawl it will serve (a few thousand are enough; the built-in one
comes from the shipped sample corpus, public-domain speeches, and misses news' own common 5-grams:
docs/registry-scale.md), then set ``minhash_registry_stoplist`` to the file before the
registry's first batch, for good.

    python -m dedup_tasks stoplist learn --input ROOT/crawl/dt=2026-12-01 --out en-crawl-v1.u32
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa

from dedup_tasks.config import ConfigError, DedupConfig
from dedup_tasks.fingerprint.minhash import (
    EN_CHAR_SHINGLES,
    EN_SHINGLE_WORDS,
    MINHASH_SEED,
    SHINGLE_CHARS,
    MinHasher,
)
from dedup_tasks.fingerprint.stoplist import LEARN_CUTOFF, Stoplist, learn_stoplist, propose_stoplist
from dedup_tasks.io import InputError, read_input
from dedup_tasks.layers.base import strings_np
from dedup_tasks.layers.minhash import minhash_rows
from dedup_tasks.pipeline import layer_view, prepare_with_text


def english_shingles(table: pa.Table, name: str, config: DedupConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shingle hashes, offsets, English rows with shingles) of the table's documents: L3's shingles,
    after the batch's own normalization and template removal."""
    prepared, near = prepare_with_text(table, config, source=name)
    view = layer_view(prepared)
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    _, counts, (hashes, offsets) = minhash_rows(
        view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, near, EN_CHAR_SHINGLES
    )
    return hashes, offsets, (strings_np(view, "_lang") == "en") & (counts > 0)


def learn_from_table(table: pa.Table, name: str, config: DedupConfig | None = None, cutoff: float = LEARN_CUTOFF) -> Stoplist:
    """The product's English shingles found in more than ``cutoff`` of the table's English documents."""
    hashes, offsets, english = english_shingles(table, name, config or DedupConfig())
    if not english.any():
        raise InputError(f"{name}: no English document to learn a stoplist from")
    return learn_stoplist(name, hashes, offsets, english, cutoff)


def propose_from_table(table: pa.Table, name: str, config: DedupConfig) -> Stoplist:
    """What a new registry under ``minhash_registry_stoplist="auto"`` is keyed on when it learns from
    this table (``fingerprint.stoplist.propose_stoplist``: the built-in list below
    ``fingerprint.stoplist.LEARN_MIN_DOCS`` English pages)."""
    hashes, offsets, english = english_shingles(table, name, config)
    return propose_stoplist(name, hashes, offsets, english)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dedup_tasks stoplist", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    learn = verbs.add_parser("learn", help="write the stoplist of common English shingles of Parquet input")
    learn.add_argument("--input", type=Path, action="append", required=True, help="a Parquet file or directory (repeatable)")
    learn.add_argument("--out", type=Path, required=True, help="the .u32 file to write (its stem is the stoplist's name)")
    learn.add_argument("--cutoff", type=float, default=LEARN_CUTOFF, help="document frequency above which a shingle is stopped")
    return parser


def stoplist_main(argv: list[str]) -> int:
    return cmd_stoplist(build_parser().parse_args(argv))


def cmd_stoplist(args: argparse.Namespace) -> int:
    if args.out.suffix != ".u32":
        raise ConfigError(f"--out {args.out}: a stoplist file ends in .u32")
    table = pa.concat_tables([read_input(path)[0] for path in args.input], promote_options="default")
    stoplist = learn_from_table(table, args.out.stem, cutoff=args.cutoff)
    stoplist.save(args.out)
    print(f"{args.out}: {len(stoplist):,} shingles in more than {args.cutoff:.1%} of the English documents; "
          f"set minhash_registry_stoplist={args.out} before the registry's first batch ({stoplist.key_space})")  # fmt: skip
    return 0
