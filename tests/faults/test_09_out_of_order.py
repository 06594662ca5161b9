"""Row 9: hours run out of order (02, then 00, then 01) no longer keep duplicates silently: the earlier
hour's commit finds hour 02's copies, retracts them from the registry, records hour 02 as needing a
rerun (registry_stale, summary.json ``stale_batches``) and warns; the rerun of hour 02 drops them."""

from __future__ import annotations

import json
import logging

import pyarrow.parquet as pq

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import run_partition
from tests.conftest import write_partition
from tests.faults.conftest import docs, make_batch

H = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]
CONFIG = DedupConfig(layers=("url", "exact", "simhash", "minhash"))


def test_out_of_order_hours_flag_the_later_hour_and_its_rerun_fixes_it(tmp_path, registry_factory, caplog):
    h0, h1 = docs("a", list(range(0, 8))), docs("b", list(range(100, 106)))
    copies = [dict(r, doc_id=f"copy-{r['doc_id']}", url=f"https://c.example/{r['doc_id']}") for r in h0 + h1]
    h2 = docs("c", list(range(200, 205))) + copies
    for batch_id, rows in zip(H, (h0, h1, h2), strict=True):
        write_partition(tmp_path, batch_id, make_batch(rows))

    def run(batch_id):
        return run_partition(BatchPaths(tmp_path, batch_id), CONFIG, registry_factory())

    assert run(H[2]).kept == len(h2)  # nothing earlier registered yet: hour 02 keeps its copies
    with caplog.at_level(logging.WARNING):
        s0 = run(H[0])
    assert s0.stale_batches == {H[2]: len(h0)}
    assert any(H[2] in r.getMessage() and "rerun" in r.getMessage() for r in caplog.records)
    assert "warning: later batch 2026-12-01T02" in s0.table()
    assert json.loads(BatchPaths(tmp_path, H[0]).summary.read_text())["stale_batches"] == {H[2]: len(h0)}
    s1 = run(H[1])
    assert s1.stale_batches == {H[2]: len(h1)}
    probe = registry_factory()
    assert probe.stale_batches()[H[2]] == {"docs": len(copies), "earlier_batches": [H[0], H[1]]}

    s2 = run(H[2])  # the rerun the flag asks for
    assert s2.kept == 5 and s2.stale_batches == {}
    assert probe.stale_batches() == {}
    kept = [pq.read_table(BatchPaths(tmp_path, b).deduped).column("content").to_pylist() for b in H]
    everything = [c for part in kept for c in part]
    assert len(everything) == len(set(everything)) == len(h0) + len(h1) + 5
    decisions = pq.read_table(BatchPaths(tmp_path, H[2]).decisions).to_pandas().set_index("doc_id")
    assert set(decisions.loc[[c["doc_id"] for c in copies], "matched_batch_id"]) == {H[0], H[1]}


def test_db_stale_lists_the_batches_to_rerun(tmp_path, registry_factory, pg_dsn, registry_schema, capsys):
    from dedup_tasks.registry.cli import db_main

    h0 = docs("a", [1, 2, 3])
    write_partition(tmp_path, H[2], make_batch([dict(r, doc_id=f"copy-{r['doc_id']}") for r in h0]))
    write_partition(tmp_path, H[0], make_batch(h0))
    for batch_id in (H[2], H[0]):
        run_partition(BatchPaths(tmp_path, batch_id), CONFIG, registry_factory())
    capsys.readouterr()
    assert db_main(["--db-url", pg_dsn, "--schema", registry_schema, "stale"]) == 0
    assert f"{H[2]}: 3 copies retracted (earlier: {H[0]}); rerun it" in capsys.readouterr().out
