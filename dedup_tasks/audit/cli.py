"""`python -m dedup_tasks audit ...`: write a week's audit, import labels, replay thresholds."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


class AuditUsageError(ValueError):
    """Bad audit arguments; printed as `error: ...` with exit code 2."""


def add_audit_parser(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser(
        "audit",
        help="weekly audit: sample, report, labels, what-if (see `audit label -h`, `audit whatif -h`)",
        description="Write ROOT/audit/week=WEEK/ (sample.parquet, audit.json, report.html) from a week of decisions.",
    )
    _common(audit)
    audit.add_argument("--per-stratum", type=int, default=None, help="sampled drops per layer and band (default 20)")
    audit.add_argument("--near-miss", type=int, default=None, help="sampled near misses per layer and band (default 20)")
    audit.add_argument("--target", type=float, default=None, help="target precision for recommendations (default 0.98)")
    audit.add_argument("--no-labels", action="store_true", help="do not read labels from PostgreSQL")
    actions = audit.add_subparsers(dest="audit_command")
    label = actions.add_parser("label", help="store the labels of a labelled sample file (Parquet or CSV)")
    _common(label, suppress=True)
    label.add_argument("--file", type=Path, required=True, help="Parquet/CSV with columns sample_id, label")
    label.add_argument("--user", default=os.environ.get("USER"), help="who labelled (default $USER)")
    whatif = actions.add_parser("whatif", help="replay a week's decisions under other thresholds")
    _common(whatif, suppress=True)
    whatif.add_argument("--threshold", action="append", default=[], metavar="LAYER=VALUE",
                        help="e.g. minhash=0.85 or simhash=2 (repeatable)")
    whatif.add_argument("--out", type=Path, help="write the changed decisions here (.csv or .parquet)")
    rec = actions.add_parser("recommend", help="labelled weeks -> a DEDUP_CONFIG overlay of thresholds (docs/audit.md)")
    _common(rec, suppress=True)
    rec.add_argument("--weeks", required=True, help="comma-separated ISO weeks whose labels count, e.g. 2026-W48,2026-W49")
    rec.add_argument("--out", type=Path, required=True, help="the overlay YAML to write (replaced atomically)")
    rec.add_argument("--target", type=float, default=argparse.SUPPRESS,
                     help="Wilson lower bound of precision to keep (default 0.95)")


def _common(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    # On the `label`/`whatif` subparsers the defaults are suppressed: otherwise their None would
    # overwrite a value given before the action word (`audit --week W label ...`).
    default = {"default": argparse.SUPPRESS} if suppress else {}
    parser.add_argument("--root", type=Path, help="data root (default DEDUP_ROOT or ./data)", **default)
    parser.add_argument("--week", help="ISO week, e.g. 2026-W49", **default)
    parser.add_argument("--db-url", help="labels database (default DEDUP_DB_URL, Airflow conn dedup_db, embedded)",
                        **default)


def cmd_audit(args: argparse.Namespace) -> int:
    """Run the audit action; a usage, label or missing-input error prints `error: ...` and returns 2."""
    try:
        return _dispatch(args)
    except (AuditUsageError, ValueError, FileNotFoundError) as exc:
        # ValueError covers LabelError, ConfigError and a malformed --week.
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    from dedup_tasks.config import DedupConfig

    overrides = {"root": str(args.root)} if args.root else {}
    if args.db_url:
        overrides["db_url"] = args.db_url
    config = DedupConfig.load(overrides)
    root = Path(config.root)
    if args.audit_command == "recommend":
        return _recommend(args, root, config)
    if not args.week:
        raise AuditUsageError("audit needs --week (an ISO week like 2026-W49)")
    if args.audit_command == "label":
        return _label(args, root, config)
    if args.audit_command == "whatif":
        return _whatif(args, root)
    return _run(args, root, config)


def _run(args: argparse.Namespace, root: Path, config: object) -> int:
    from dedup_tasks.audit.run import run_audit

    kwargs = {k: v for k, v in (("per_stratum", args.per_stratum), ("near_miss_per_layer", args.near_miss),
                                 ("target_precision", args.target)) if v is not None}
    result = run_audit(root, args.week, db_url=config.db_url, schema=config.db_schema,
                       use_labels=not args.no_labels, **kwargs)
    print(f"week {result.week}: {result.rows} decisions, {result.sampled} sampled pairs, {result.labelled} labelled")
    print(f"report: {result.report}\nsample: {result.sample}")
    return 0


def _label(args: argparse.Namespace, root: Path, config: object) -> int:
    from dedup_tasks.audit.run import import_labels

    if not args.user:
        raise AuditUsageError("audit label needs --user NAME")
    stored = import_labels(root, args.week, args.file, args.user, db_url=config.db_url, schema=config.db_schema)
    print(f"stored {stored} label(s) of week {args.week} by {args.user}")
    return 0


def _recommend(args: argparse.Namespace, root: Path, config: object) -> int:
    from dedup_tasks.audit.labels import open_label_store
    from dedup_tasks.audit.recommend import DEFAULT_TARGET, recommend, write_overlay

    weeks = [w.strip() for w in args.weeks.split(",") if w.strip()]
    if not weeks:
        raise AuditUsageError("recommend needs --weeks W1[,W2...]")
    target = getattr(args, "target", None) or DEFAULT_TARGET
    with open_label_store(root, config.db_url, config.db_schema) as store:
        import pandas as pd

        labels = pd.concat([store.load(week=w) for w in weeks], ignore_index=True)
    result = recommend(root, weeks, labels, target)
    command = (f"python -m dedup_tasks audit recommend --root {root} --weeks {','.join(weeks)} --target {target:g} "
               f"--out {args.out}")
    write_overlay(result, args.out, command, root)
    for rec in result.recommendations:
        value = "left out" if rec.value is None else f"{rec.value:g}"
        print(f"{rec.setting}: {value} ({rec.labels} labels; {rec.note})")
    print(f"overlay: {args.out}" + (f"; hours to rerun: {', '.join(result.hours)}" if result.hours else ""))
    return 0


def _whatif(args: argparse.Namespace, root: Path) -> int:
    from dedup_tasks.audit.sampling import load_week_decisions
    from dedup_tasks.audit.whatif import THRESHOLD_LAYERS, ThresholdError, parse_thresholds, replay

    raw = {}
    for item in args.threshold:
        layer, sep, value = item.partition("=")
        if not sep:
            raise AuditUsageError(f"--threshold expects LAYER=VALUE, got {item!r}")
        if layer.strip() not in THRESHOLD_LAYERS:
            raise AuditUsageError(f"--threshold {item!r}: only {list(THRESHOLD_LAYERS)} have a threshold")
        raw[layer.strip()] = value
    try:
        thresholds = parse_thresholds(raw)  # the plugin's checks: finite and in the layer's range
    except ThresholdError as exc:
        raise AuditUsageError(f"--threshold: {exc}") from exc
    if not thresholds:
        raise AuditUsageError("whatif needs at least one --threshold LAYER=VALUE")
    decisions = load_week_decisions(root, args.week)
    result = replay(decisions, thresholds)
    print(result.per_layer.to_string(index=False))
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out:
        if args.out.suffix == ".parquet":
            result.changes.to_parquet(args.out, index=False)
        else:
            result.changes.to_csv(args.out, index=False)
        print(f"changes: {args.out}")
    return 0
