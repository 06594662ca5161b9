import numpy as np

from dedup_tasks.fingerprint.candidates import stream_minhash, stream_simhash


def test_cluster_matches_first_kept_document():
    base = np.uint64(0x0123456789ABCDEF)
    sims = np.array([base, base ^ np.uint64(1), base ^ np.uint64(3), base ^ np.uint64(0xFF00FF00FF00FF00)], np.uint64)
    out = stream_simhash(sims, np.ones(4, bool), 3, 12)
    assert out.matched.tolist() == [-1, 0, 0, -1]
    assert out.score[1] == 1 and out.score[2] == 2


def test_chain_only_matches_kept_documents():
    # b is within 3 of a and c within 3 of b, but c is 6 from a: b is dropped, so c is compared with
    # kept documents only and survives (streaming semantics, same as against the registry).
    a = np.uint64(0)
    b = np.uint64(0b111)
    c = np.uint64(0b111111)
    out = stream_simhash(np.array([a, b, c], np.uint64), np.ones(3, bool), 3, 12)
    assert out.matched.tolist() == [-1, 0, -1]
    assert out.suspect[2] == 0 and out.suspect_score[2] == 6


def test_inactive_rows_neither_match_nor_are_matched():
    sims = np.zeros(3, np.uint64)
    out = stream_simhash(sims, np.array([False, True, True]), 3, 12)
    assert out.matched.tolist() == [-1, -1, 1]


def test_minhash_threshold_and_best_candidate():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, 128, dtype=np.uint32)
    b = a.copy()
    b[:20] += 1  # est. Jaccard 108/128 = 0.84
    c = a.copy()
    c[:40] += 1  # 0.69: a near miss
    sig = np.stack([a, b, c])
    keys = np.zeros((3, 1), np.uint64)  # everything shares one bucket
    out = stream_minhash(keys, sig, np.ones(3, bool), 0.8, 0.4)
    assert out.matched.tolist() == [-1, 0, -1]
    assert abs(out.score[1] - 108 / 128) < 1e-9
    assert out.suspect[2] == 0
