"""Command line: ``python -m dedup_tasks run|show|seen|db|audit|stoplist|cross-encoder ...``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from dedup_tasks.cli_errors import ErrorLineParser, report_or_raise
from dedup_tasks.config import ALL_LAYERS, ConfigError, DedupConfig
from dedup_tasks.io import BatchPaths, InputError, check_input, parse_batch_id
from dedup_tasks.layers import LayerStats
from dedup_tasks.registry.base import MemoryRegistry, Registry
from dedup_tasks.runtime import is_entry_point, process_settings, resume_gc, skip_pyarrow_pandas_probe


def _parse_set(values: list[str]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = ErrorLineParser(prog="python -m dedup_tasks", description="Deduplicate web-crawl batches.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="deduplicate one batch (an hour partition, or any Parquet file/dir)")
    run.add_argument("--root", type=Path, help="data root (default DEDUP_ROOT or ./data)")
    run.add_argument("--batch", help="batch id, an hour like 2026-12-01T00 (reads ROOT/crawl/dt=.../hour=...)")
    run.add_argument("--input", type=Path, help="a Parquet file or directory outside the root layout")
    run.add_argument("--out", type=Path, help="with --input: where deduped/, decisions/ and runs/ go")
    run.add_argument("--layers", help=f"comma-separated subset of {','.join(ALL_LAYERS)}")
    run.add_argument("--no-registry", action="store_true", help="in-batch dedup only: no registry is read or written")
    run.add_argument("--db-url", help="registry DSN (default DEDUP_DB_URL, Airflow conn dedup_db, embedded)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    run.add_argument("--no-progress", action="store_true", help="plain one-line-per-layer output")
    run.add_argument("--until", help="with --batch: run every hour from --batch to this one (inclusive), oldest first")
    run.add_argument("--engine", choices=("local", "spark"), default="local", help="local: this process (default); spark: Apache Spark")
    run.add_argument("--spark-master", help="with --engine spark: master URL (default SPARK_MASTER, else local[*])")
    run.add_argument("--partitions", type=int, help="with --engine spark: input partitions (default 2 per core)")

    # db and stoplist parse their own arguments (main hands them everything after the command word):
    # listed here for the command list only.
    sub.add_parser("db", help="registry maintenance: migrate, status, rebuild-bloom, compact")

    show = sub.add_parser("show", help="print the per-layer table and output paths of published batches")
    show.add_argument("--root", type=Path, help="data root (default DEDUP_ROOT or ./data)")
    show.add_argument("--batch", action="append", default=[], help="batch id (repeatable; default: all)")

    seen = sub.add_parser("seen", help="for a crawler: which URLs (stdin, one a line) are registered (JSON lines out)")
    seen.add_argument("--root", type=Path, help="data root (default DEDUP_ROOT or ./data)")
    seen.add_argument("--db-url", help="registry DSN (default DEDUP_DB_URL, Airflow conn dedup_db, embedded)")
    seen.add_argument("--no-bloom", action="store_true", help="ask the registry for every URL (no Bloom filter)")

    from dedup_tasks.audit.cli import add_audit_parser

    add_audit_parser(sub)
    sub.add_parser("stoplist", help="learn the registry index's stoplist from a sample of the crawl")
    sub.add_parser("cross-encoder", help="train the cross-encoder that confirms rewrites (semantic_cross_encoder_<lang>)")
    return parser


class Progress:
    """A tqdm bar over the cascade's steps on a terminal; one line per step otherwise."""

    def __init__(self, enabled: bool, total_steps: int, stream=sys.stderr) -> None:
        self.stream = stream
        self.bar = None
        if enabled and stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, unit="step", file=stream, desc="cascade")

    def __call__(self, stats: LayerStats) -> None:
        rate = stats.rows_in / stats.seconds if stats.seconds > 0 else float("inf")
        text = f"{stats.layer}: {stats.rows_in} in, {stats.dropped} dropped, {stats.seconds:.2f}s ({rate:,.0f} docs/s)"
        if self.bar is not None:
            self.bar.set_postfix_str(text)
            self.bar.update(1)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextlib.contextmanager
def open_registry_for(config: DedupConfig, no_registry: bool) -> Iterator[Registry]:
    if no_registry:
        yield MemoryRegistry(plain_band_keys=True)
        return
    from dedup_tasks.registry.connect import open_registry

    with open_registry(config, schema=config.db_schema) as registry:
        yield registry


def cmd_run(args: argparse.Namespace) -> int:
    from dedup_tasks.pipeline import run_partition

    overrides: dict[str, object] = _parse_set(args.set)
    if args.root:
        overrides["root"] = str(args.root)
    if args.layers:
        overrides["layers"] = args.layers
    if args.db_url:
        overrides["db_url"] = args.db_url
    config = DedupConfig.load(overrides)
    if args.input:
        if not args.out:
            raise ConfigError("--input needs --out (where deduped/, decisions/ and runs/ are written)")
        batch_id = parse_batch_id(args.batch) if args.batch else args.input.stem.replace(" ", "_")
        paths = BatchPaths(args.out, batch_id, input_override=args.input)
        config = config.replace(root=str(args.out))
        batches = [paths]
    else:
        if not args.batch:
            raise ConfigError("run needs --batch (or --input FILE_OR_DIR --out DIR)")
        root = Path(config.root)
        batches = [BatchPaths(root, b) for b in batch_range(args.batch, args.until)]
        if args.until:
            # An archive: hours without an input partition are skipped, and said so.
            missing = [p for p in batches if not p.input.exists()]
            for p in missing:
                print(f"{p.batch_id}: no input partition at {p.input}, skipped", file=sys.stderr)
            batches = [p for p in batches if p.input.exists()]
            if not batches:
                raise InputError(f"no input partition between {args.batch} and {args.until} under {root / 'crawl'}")
    for paths in batches:
        check_input(paths.input)  # cheap checks first: before a registry or Spark starts
    if is_entry_point() and args.engine != "spark" and "semantic" not in config.layers:
        # L1-L3 need no pandas, and this process ends with the run: pyarrow's first conversions no
        # longer import it (~0.16 CPU-s, ~30 MiB; runtime.skip_pyarrow_pandas_probe).
        skip_pyarrow_pandas_probe()
    steps = (3 + len(config.layers)) * len(batches)
    progress = Progress(not args.no_progress, steps)
    try:
        with open_registry_for(config, args.no_registry) as registry:
            if args.engine == "spark":
                resume_gc()  # a Spark driver runs every hour in one call: no start-up pause for it
                from dedup_tasks.engines.spark import run_batches, spark_session

                spark = spark_session(args.spark_master)
                summaries = run_batches(spark, batches, config, registry, on_layer=progress, partitions=args.partitions)
            else:
                summaries = []
                for paths in batches:
                    summaries.append(run_partition(paths, config, registry, on_layer=progress))
                    resume_gc()  # start-up is over (runtime.pause_gc): later hours collect as usual
    finally:
        progress.close()
    for paths, summary in zip(batches, summaries, strict=True):
        print(summary.table())
        print(f"deduped:   {paths.deduped}\ndecisions: {paths.decisions}\nsummary:   {paths.summary}")
    return 0


def cmd_seen(args: argparse.Namespace) -> int:
    """stdin URLs -> stdout JSON answers (dedup_tasks.registry.seen); counts on stderr."""
    from dedup_tasks.registry.connect import bloom_path, database
    from dedup_tasks.registry.seen import SeenIndex, answer_stream, read_lines

    overrides = {k: v for k, v in (("root", args.root and str(args.root)), ("db_url", args.db_url)) if v}
    config = DedupConfig.load(overrides)
    root = Path(config.root)
    with database(root, config.db_url) as dsn, \
            SeenIndex(dsn, config.db_schema, None if args.no_bloom else bloom_path(root)) as index:
        stats = answer_stream(index, read_lines(sys.stdin.buffer), config.tracking_params, sys.stdout.buffer)
    print(f"seen: {stats['urls']} urls, {stats['seen']} seen, {stats['invalid']} unparsable, "
          f"{stats['bloom_no']} answered by the Bloom filter, {stats['queries']} registry queries", file=sys.stderr)
    return 0


def batch_range(first: str, last: str | None) -> list[str]:
    """Batch ids of every hour from ``first`` to ``last`` (inclusive), or just ``first``."""
    from datetime import datetime, timedelta

    start = parse_batch_id(first)
    if last is None:
        return [start]
    end = parse_batch_id(last)
    fmt = "%Y-%m-%dT%H"
    try:
        t, stop = datetime.strptime(start, fmt), datetime.strptime(end, fmt)
    except ValueError as exc:
        raise ConfigError(f"--until needs hour batch ids like 2026-12-01T00, got {start!r}..{end!r}") from exc
    if stop < t:
        raise ConfigError(f"--until {end} is before --batch {start}")
    out = []
    while t <= stop:
        out.append(t.strftime(fmt))
        t += timedelta(hours=1)
    return out


def cmd_show(args: argparse.Namespace) -> int:
    import json

    from dedup_tasks.pipeline import BatchSummary

    root = args.root or Path(DedupConfig.load().root)
    batches = [parse_batch_id(b) for b in args.batch] or sorted(
        p.name.split("=", 1)[1] for p in (root / "runs").glob("batch_id=*")
    )
    if not batches:
        raise InputError(f"no published batches under {root / 'runs'}")
    from dedup_tasks.pipeline import recover

    for batch_id in batches:
        paths = BatchPaths(root, batch_id)
        recover(paths)  # a publish a crash interrupted is completed before it is shown
        if not paths.summary.exists():
            raise InputError(f"batch {batch_id} has not been published under {root} ({paths.summary} is missing)")
        data = json.loads(paths.summary.read_text())
        summary = BatchSummary(**{k: v for k, v in data.items() if k in BatchSummary.__dataclass_fields__})
        summary.layers = [LayerStats(**layer) for layer in data["layers"]]
        print(summary.table())
        print(f"deduped:   {paths.deduped}\ndecisions: {paths.decisions}\nsummary:   {paths.summary}\n")
    return 0


# Commands with parsers of their own, which take everything after the command word (an argparse.REMAINDER
# subparser would not take a leading option: `db --db-url URL compact`).
_OWN_PARSERS = ("db", "stoplist", "cross-encoder")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in _OWN_PARSERS:
        args = argparse.Namespace(command=argv[0], rest=argv[1:])
    else:
        args = build_parser().parse_args(argv)
    if args.command != "run":
        resume_gc()  # only a run's start-up goes without the collector (runtime.pause_gc)
    process_settings()
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "show":
            return cmd_show(args)
        if args.command == "seen":
            return cmd_seen(args)
        if args.command == "db":
            from dedup_tasks.registry.cli import db_main

            return db_main(args.rest)
        if args.command == "audit":
            from dedup_tasks.audit.cli import cmd_audit

            return cmd_audit(args)
        if args.command == "stoplist":
            from dedup_tasks.stoplist_learn import stoplist_main

            return stoplist_main(args.rest)
        if args.command == "cross-encoder":
            from dedup_tasks.embed.cross_training import cross_encoder_main

            return cross_encoder_main(args.rest)
    except Exception as exc:  # noqa: BLE001 - input, registry and output errors are one line; others re-raised
        return report_or_raise(exc)
    return 1
