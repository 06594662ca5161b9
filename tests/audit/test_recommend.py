"""`audit recommend` end to end on a real registry: labels -> overlay -> rerun of the hours it names.

The generated week runs through L1, exact and L2 (SimHash, the last layer here, so what it keeps
stays kept) with a PostgreSQL registry; analysts' labels go in through `audit label`, the overlay
comes out of `audit recommend`, and the hours are rerun with `run --batch` under DEDUP_CONFIG.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from tests.audit.synth import HOURS, WEEK, generate_rows
from tests.conftest import REPO, make_batch, write_partition

LAYERS = "url,exact,simhash"


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "dedup_tasks", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def week(tmp_path, pg_dsn):
    """The generated week, deduplicated hour by hour with a PostgreSQL registry, and audited."""
    import psycopg2

    root = tmp_path / "root"
    rows = generate_rows()
    for i, hour in enumerate(HOURS):
        write_partition(root, hour, make_batch(rows[hour], start=pd.Timestamp(f"{hour}:00:00Z") + pd.Timedelta(seconds=i)))
    schema = f"t_{uuid.uuid4().hex[:12]}"
    env = {"DEDUP_DB_URL": pg_dsn, "DEDUP_DB_SCHEMA": schema, "PYTHONPATH": str(REPO), "DEDUP_CONFIG": ""}
    cli("run", "--root", str(root), "--batch", HOURS[0], "--until", HOURS[-1], "--layers", LAYERS, "--no-progress", env=env)
    cli("audit", "--root", str(root), "--week", WEEK, "--per-stratum", "50", "--near-miss", "50", env=env)
    yield root, env
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _sample(root: Path) -> pd.DataFrame:
    return pd.read_parquet(root / "audit" / f"week={WEEK}" / "sample.parquet")


def _label(root: Path, env: dict, labels: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "labelled.csv"
    labels[["sample_id", "label"]].to_csv(path, index=False)
    out = cli("audit", "--root", str(root), "--week", WEEK, "label", "--file", str(path), "--user", "ana", env=env)
    assert f"stored {len(labels)} label(s)" in out.stdout


def _recommend(root: Path, env: dict, out: Path, target: float) -> tuple[dict, list[str], str]:
    done = cli("audit", "recommend", "--root", str(root), "--weeks", WEEK, "--out", str(out), "--target", str(target),
               env=env)
    text = out.read_text()
    hours = re.findall(r"run --root \S+ --batch (\S+)", text)
    return yaml.safe_load(text) or {}, hours, done.stdout


def _rerun(root: Path, env: dict, overlay: Path, hours: list[str]) -> pd.DataFrame:
    for hour in hours:
        cli("run", "--root", str(root), "--batch", hour, "--layers", LAYERS, "--no-progress",
            env={**env, "DEDUP_CONFIG": str(overlay)})
    return pd.concat([pq.read_table(root / "decisions" / f"dt={h[:10]}" / f"hour={h[11:]}").to_pandas() for h in HOURS],
                     ignore_index=True)


def _decisions(root: Path) -> pd.DataFrame:
    from dedup_tasks.audit.sampling import load_week_decisions

    return load_week_decisions(root, WEEK)


def test_not_duplicate_labels_on_the_loosest_band_tighten_it_and_the_rerun_keeps_those_pages(week, tmp_path):
    root, env = week
    sample = _sample(root)
    drops = sample[sample["kind"] == "drop"]
    loosest = drops[(drops["layer"] == "simhash") & (drops["band"] == "d=3")]
    assert len(loosest) >= 5
    labels = drops.assign(label=np.where(drops["sample_id"].isin(loosest["sample_id"]), "not_duplicate", "duplicate"))
    _label(root, env, labels, tmp_path)
    before = _decisions(root)
    overlay, hours, printed = _recommend(root, env, tmp_path / "overlay.yaml", target=0.75)
    assert overlay == {"simhash_max_distance": 2}  # 3 -> 2: the "not duplicate" band is no longer dropped
    text = (tmp_path / "overlay.yaml").read_text()
    assert "# simhash_max_distance (simhash, all languages): 3 -> 2" in text
    assert re.search(r"Wilson 95% \[0\.\d{3}, 1\.000\]", text)
    # The what-if names exactly the hours holding those drops.
    assert hours == sorted(loosest["batch_id"].unique().tolist())
    assert f"hours to rerun: {', '.join(hours)}" in printed
    after = _rerun(root, env, tmp_path / "overlay.yaml", hours)
    pages = after.merge(loosest[["batch_id", "doc_id"]], on=["batch_id", "doc_id"])
    assert len(pages) == len(loosest) and (pages["action"] == "keep").all()
    # Nothing else changed its action, and the rerun hours record the new configuration.
    merged = before.merge(after, on=["batch_id", "doc_id"], suffixes=("_before", "_after"))
    flipped = merged[merged["action_before"] != merged["action_after"]]
    assert set(zip(flipped["batch_id"], flipped["doc_id"], strict=True)) == set(
        zip(loosest["batch_id"], loosest["doc_id"], strict=True))
    rerun = merged[merged["batch_id"].isin(hours)]
    assert (rerun["config_hash_before"] != rerun["config_hash_after"]).all()


def test_duplicate_labels_on_near_misses_loosen_it_and_the_rerun_drops_them(week, tmp_path):
    root, env = week
    sample = _sample(root)
    near = sample[(sample["kind"] == "near_miss") & (sample["layer"] == "simhash")]
    closest = near[near["band"] == "d=4"]
    assert len(closest) >= 3
    labels = sample[(sample["kind"] == "drop") | (sample["sample_id"].isin(near["sample_id"]))]
    labels = labels.assign(label=np.where((labels["kind"] == "drop") | labels["sample_id"].isin(closest["sample_id"]),
                                          "duplicate", "not_duplicate"))
    _label(root, env, labels, tmp_path)
    overlay, hours, _ = _recommend(root, env, tmp_path / "overlay.yaml", target=0.85)
    assert overlay == {"simhash_max_distance": 4}  # 3 -> 4: the labelled d=4 near misses are duplicates
    assert hours == sorted(closest["batch_id"].unique().tolist())
    after = _rerun(root, env, tmp_path / "overlay.yaml", hours)
    pages = after.merge(closest[["batch_id", "doc_id", "matched_batch_id", "matched_doc_id"]], on=["batch_id", "doc_id"],
                        suffixes=("", "_near"))
    assert len(pages) == len(closest)
    # Each one whose near-miss partner is still kept is now dropped as its copy. A chain (A near B,
    # B near C, all labelled) keeps one link: B dropped as C's copy is no candidate for A any more,
    # which the what-if, replaying stored scores row by row, cannot foresee.
    kept = after[after["action"] == "keep"][["batch_id", "doc_id"]].rename(
        columns={"batch_id": "matched_batch_id_near", "doc_id": "matched_doc_id_near"})
    partner_kept = pages.merge(kept, on=["matched_batch_id_near", "matched_doc_id_near"])
    assert len(partner_kept) >= len(closest) - 2
    assert (partner_kept["action"] == "drop").all() and (partner_kept["layer"] == "simhash").all()
    assert (partner_kept["score"] == 4).all()
    chained = pages[pages["action"] == "keep"]
    dropped_partners = after[after["action"] == "drop"].set_index(["batch_id", "doc_id"]).index
    assert all((b, d) in dropped_partners for b, d in zip(chained["matched_batch_id_near"], chained["matched_doc_id_near"],
                                                          strict=True))


def test_too_few_labels_leave_a_setting_out_and_say_so(week, tmp_path):
    root, env = week
    sample = _sample(root)
    few = sample[(sample["kind"] == "drop") & (sample["layer"] == "simhash")].head(4).assign(label="duplicate")
    _label(root, env, few, tmp_path)
    overlay, hours, printed = _recommend(root, env, tmp_path / "overlay.yaml", target=0.95)
    assert overlay == {} and hours == []
    assert "simhash_max_distance: left out (4 labels; left out: 4 labelled pairs, fewer than 10)" in printed
    assert "# simhash_max_distance (simhash, all languages): 3, left out: 4 labelled pairs" in (tmp_path / "overlay.yaml").read_text()


def test_a_week_without_an_audit_is_a_clear_error(week, tmp_path):
    root, env = week
    done = subprocess.run([sys.executable, "-m", "dedup_tasks", "audit", "recommend", "--root", str(root),
                           "--weeks", "2026-W30", "--out", str(tmp_path / "o.yaml")], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **env})
    assert done.returncode == 2 and "no audit for week 2026-W30" in done.stderr
    assert not (tmp_path / "o.yaml").exists()


def test_demo_week_labelled_from_its_sample_file_gives_an_overlay_run_accepts(tmp_path, pg_dsn):
    """The demo's crawl (bench/sample_corpus, 3 hours), audited; an analyst labels the sample file and
    stores it; the overlay `audit recommend` writes is taken by DEDUP_CONFIG and by `run --set`."""
    import psycopg2

    root = tmp_path / "demo"
    schema = f"t_{uuid.uuid4().hex[:12]}"
    env = {"DEDUP_DB_URL": pg_dsn, "DEDUP_DB_SCHEMA": schema, "PYTHONPATH": str(REPO), "DEDUP_CONFIG": ""}
    subprocess.run([sys.executable, "-m", "bench.generate", "--source", "sample", "--docs", "300", "--hours", "3",
                    "--seed", "0", "--out", str(root)], cwd=REPO, check=True, capture_output=True, env={**os.environ, **env})
    try:
        layers = "url,exact,simhash,minhash"
        cli("run", "--root", str(root), "--batch", HOURS[0], "--until", HOURS[-1], "--layers", layers, "--no-progress",
            env=env)
        cli("audit", "--root", str(root), "--week", WEEK, env=env)
        sample = _sample(root)
        # The analyst's file: the sample with its label column filled (Parquet, as downloaded from the UI).
        minhash = sample[(sample["kind"] == "drop") & (sample["layer"] == "minhash")]
        loosest = minhash[minhash["score"] <= minhash["score"].quantile(0.2)]
        labelled = sample.assign(label=np.where(sample["sample_id"].isin(loosest["sample_id"]) | (sample["kind"] == "near_miss"),
                                                "not_duplicate", "duplicate"))
        labelled.to_parquet(tmp_path / "labelled.parquet", index=False)
        cli("audit", "--root", str(root), "--week", WEEK, "label", "--file", str(tmp_path / "labelled.parquet"),
            "--user", "ana", env=env)
        overlay, hours, printed = _recommend(root, env, tmp_path / "overlay.yaml", target=0.9)
        assert overlay, printed  # at least one setting moved
        from dedup_tasks.config import DedupConfig

        base = DedupConfig.load({"layers": layers}, env={})
        merged = DedupConfig.load({"layers": layers}, env={"DEDUP_CONFIG": str(tmp_path / "overlay.yaml")})
        assert {k: getattr(merged, k) for k in overlay} == overlay and merged.config_hash != base.config_hash
        hour = hours[0] if hours else HOURS[0]
        with_file = cli("run", "--root", str(root), "--batch", hour, "--layers", layers, "--no-progress",
                        env={**env, "DEDUP_CONFIG": str(tmp_path / "overlay.yaml")})
        sets = [a for k, v in overlay.items() for a in ("--set", f"{k}={v}")]
        with_set = cli("run", "--root", str(root), "--batch", hour, "--layers", layers, "--no-progress", *sets, env=env)
        assert with_file.stdout.split("\n")[0] == with_set.stdout.split("\n")[0]
        hashes = pq.read_table(root / "decisions" / f"dt={hour[:10]}" / f"hour={hour[11:]}", columns=["config_hash"])
        assert set(hashes.column("config_hash").to_pylist()) == {merged.config_hash}
    finally:
        with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_the_trigger_form_reruns_an_hour_with_the_overlay_and_scheduled_runs_take_the_deployed_file(tmp_path, monkeypatch):
    """Airflow: the threshold Params default to null, so DEDUP_CONFIG (with the overlay) decides
    scheduled runs; a rerun triggered with the overlay's values as Params gets the same configuration."""
    from dedup_tasks.airflow_support.tasks import PARAM_SPECS, config_from_params
    from dedup_tasks.config import DedupConfig

    base = tmp_path / "deploy.yaml"
    base.write_text(f"root: {tmp_path}\nminhash_threshold: 0.75\n")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("# from audit recommend\nsimhash_max_distance: 2\n")
    defaults = {name: spec[1] for name, spec in PARAM_SPECS.items()}
    monkeypatch.setenv("DEDUP_CONFIG", f"{base}{os.pathsep}{overlay}")
    scheduled = config_from_params(defaults)
    assert scheduled.simhash_max_distance == 2 and scheduled.minhash_threshold == 0.75
    monkeypatch.setenv("DEDUP_CONFIG", str(base))
    base_only = DedupConfig.load()
    triggered = config_from_params({**defaults, "batch_hour": "2026-12-01T00", **yaml.safe_load(overlay.read_text())})
    assert triggered.config_hash == scheduled.config_hash != base_only.config_hash
