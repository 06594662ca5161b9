"""The demo's closing summary: drops per layer, three example drops with their reasons, next commands.

Reads only the decisions Parquet the DAG runs wrote (``ROOT/decisions/dt=.../hour=...``), so what it
prints is what a user would find there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.dataset as ds

LAYERS = ("url", "exact", "simhash", "minhash", "semantic")


def _describe(row: dict) -> str:
    if row.get("reason"):
        return str(row["reason"])
    # Older decisions may carry no reason: say what the columns do record.
    parts = [f"{row['layer']} layer"]
    if row.get("score") is not None:
        parts.append(f"score {row['score']:.4g}")
    if row.get("threshold") is not None:
        parts.append(f"threshold {row['threshold']:.4g}")
    return ", ".join(parts) + " (no reason recorded)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--week", required=True, help="ISO week of the demo's batches, for the audit command")
    args = parser.parse_args(argv)
    files = sorted((args.root / "decisions").glob("dt=*/hour=*/*.parquet"))
    if not files:
        print(f"no decisions under {args.root / 'decisions'}", file=sys.stderr)
        return 1
    table = ds.dataset([str(f) for f in files], format="parquet").to_table()
    rows = table.to_pandas()
    drops = rows[rows["action"] == "drop"]
    print(f"\n== what was dropped: {len(drops):,} of {len(rows):,} documents in {rows['batch_id'].nunique()} hours")
    counts = drops.groupby(["batch_id", "layer"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[c for c in LAYERS if c in counts.columns] + sorted(set(counts.columns) - set(LAYERS)))
    print(counts.to_string())
    print("\n== three example drops (from the decisions Parquet)")
    # One example from each of the three most specific layers that dropped something.
    shown = 0
    for layer in ("semantic", "minhash", "simhash", "exact", "url"):
        pick = drops[drops["layer"] == layer]
        if pick.empty or shown == 3:
            continue
        # Prefer a match in an earlier hour: it shows the registry at work, not only in-batch dedup.
        pick = pick.assign(_same=pick["matched_batch_id"] == pick["batch_id"])
        row = pick.sort_values(["_same", "batch_id", "doc_id"]).iloc[0].to_dict()
        row = {k: (None if v != v else v) for k, v in row.items()}  # NaN -> None
        print(f"- {row['doc_id']} ({row['batch_id']}) dropped by {row['layer']} as a copy of "
              f"{row['matched_doc_id']} ({row['matched_batch_id']}):\n    {_describe(row)}")
        shown += 1
    root = args.root
    print(
        "\n== next commands\n"
        f"  python -m dedup_tasks show --root {root} --batch 2026-12-01T00    # per-layer table and output paths\n"
        f"  python -m dedup_tasks audit --root {root} --week {args.week}        # sample, metrics, report.html\n"
        f"      then open {root}/audit/week={args.week}/report.html\n"
        "  python -m dedup_tasks run -h                                       # run any hour or Parquet file\n"
        "  Airflow UI: the README's 'Airflow UI' section (python -m airflow standalone with this project's\n"
        "      AIRFLOW_HOME, dags and plugins), then\n"
        "      http://localhost:8080/ (DAG crawl_dedup) and the audit page at http://localhost:8080/dedup-audit/\n"
        "      (in the UI: Browse > Dedup audit, http://localhost:8080/plugin/dedup-audit)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
