"""Row 2: concurrent commits. Earlier batch wins under either commit order; a rerun afterwards never
keeps a pair twice; empty documents are never registered by content (nor dropped as ``exact``); no
document is dropped against one that was itself dropped at commit.

Hour 01 holds copies (same title and content, other URLs) of hour 00's documents. Two threads run the
real pipeline on the real PostgreSQL; the second commit is held until the first has committed, while
both batches' lookups ran before either commit (the race of two CLI runs started 0.5 s apart).
"""

from __future__ import annotations

import threading

import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.pipeline import run_batch
from tests.faults.conftest import docs, make_batch

H0, H1 = "2026-12-01T00", "2026-12-01T01"
CONFIG = DedupConfig(layers=("url", "exact", "simhash", "minhash"))
SEEDS = list(range(10))


def hour(tag: str) -> list[dict]:
    rows = docs("orig" if tag == H0 else "copy", SEEDS, host="h0.example" if tag == H0 else "h1.example")
    # An in-batch exact repeat of the first document and an empty document in each hour.
    rows.append(dict(rows[0], doc_id=f"repeat-{tag}", url=f"https://{tag}.example/repeat"))
    rows.append({"doc_id": f"empty-{tag}", "url": f"https://{tag}.example/empty", "title": "", "content": ""})
    return rows


def run(registry, batch_id: str):
    return run_batch(make_batch(hour(batch_id)), batch_id, CONFIG, registry)


def race(registry_factory, first: str) -> dict:
    """Both batches run their layers; ``first`` commits, then the other."""
    registries = {H0: registry_factory(), H1: registry_factory()}
    looked_up = threading.Barrier(2)
    first_done = threading.Event()
    results, errors = {}, []
    for batch_id, registry in registries.items():
        real = registry.commit

        def gated(b, kept, _real=real, _batch=batch_id, **kw):
            looked_up.wait(30)  # both batches' layers are done: neither saw the other
            if _batch != first:
                assert first_done.wait(30)
            try:
                return _real(b, kept, **kw)
            finally:
                if _batch == first:
                    first_done.set()

        registry.commit = gated

    def work(batch_id):
        try:
            results[batch_id] = run(registries[batch_id], batch_id)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in (H0, H1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


def actions(result) -> dict[str, tuple]:
    d = result.decisions.to_pydict()
    return {doc: (a, lay, m, mb) for doc, a, lay, m, mb in zip(d["doc_id"], d["action"], d["layer"], d["matched_doc_id"], d["matched_batch_id"], strict=True)}


def kept_pairs(*results) -> int:
    kept = set()
    for r in results:
        kept |= {doc for doc, (a, *_rest) in actions(r).items() if a == "keep"}
    return sum(f"orig{s}" in kept and f"copy{s}" in kept for s in SEEDS)


def registered(registry, batch_id: str) -> set[str]:
    with registry._transaction() as cur:
        cur.execute("SELECT doc_id FROM content_hashes WHERE batch_id = %s", (batch_id,))
        return {r[0] for r in cur.fetchall()}


def check_no_drop_against_dropped(result):
    acts = actions(result)
    for doc, (action, _layer, matched, matched_batch) in acts.items():
        if action == "drop" and matched_batch == result.summary.batch_id:
            assert acts[matched][0] == "keep", (doc, matched)


@pytest.mark.parametrize("first", [H0, H1], ids=["earlier-commits-first", "later-commits-first"])
def test_earlier_batch_wins_under_either_commit_order_and_after_reruns(registry_factory, first):
    results = race(registry_factory, first)
    r0, r1 = results[H0], results[H1]
    a0 = actions(r0)
    # Hour 00's originals are kept whichever commits first.
    assert all(a0[f"orig{s}"][0] == "keep" for s in SEEDS), a0
    for r in (r0, r1):
        check_no_drop_against_dropped(r)
        # The empty document is kept, never dropped as an exact copy of the other hour's empty one.
        assert actions(r)[f"empty-{r.summary.batch_id}"][0] == "keep"
    probe = registry_factory()
    assert not any(doc.startswith("empty") for doc in registered(probe, H0) | registered(probe, H1))
    assert not any(doc.startswith("copy") for doc in registered(probe, H1))
    if first == H0:
        # Hour 01's re-check lost its copies to hour 00: dropped, naming hour 00's documents.
        assert kept_pairs(r0, r1) == 0 and r0.summary.stale_batches == {}
        assert actions(r1)["copy3"][1:] == ("exact", "orig3", H0) or actions(r1)["copy3"][2:] == ("orig3", H0)
        # Its in-batch repeat of copy0 names what copy0 was dropped for.
        assert actions(r1)[f"repeat-{H1}"][2:] == ("orig0", H0)
    else:
        # Hour 01 committed its copies first: hour 00's commit retracted them and flags hour 01.
        assert r0.summary.stale_batches == {H1: len(SEEDS)}
        assert probe.stale_batches()[H1]["earlier_batches"] == [H0]

    # A rerun of hour 00 keeps its originals and leaves hour 01 flagged if it was.
    r0b = run(registry_factory(), H0)
    assert all(actions(r0b)[f"orig{s}"][0] == "keep" for s in SEEDS)
    assert (H1 in probe.stale_batches()) == (first == H1)
    # A rerun of hour 01 drops every copy against hour 00's document; nothing is flagged any more.
    r1b = run(registry_factory(), H1)
    assert kept_pairs(r0b, r1b) == 0
    assert all(actions(r1b)[f"copy{s}"][0] == "drop" and actions(r1b)[f"copy{s}"][3] == H0 for s in SEEDS)
    assert probe.stale_batches() == {}
    assert registered(probe, H0) >= {f"orig{s}" for s in SEEDS}
