"""Peer deduplicators of the benchmark (bench/peers.py) on a tiny handmade zh + en batch."""

from __future__ import annotations

import pandas as pd
import pytest

from bench import peers

EN_A = (
    "The central bank said on Tuesday that it would keep its benchmark interest rate unchanged for the "
    "third consecutive meeting, citing persistent inflation in services and a labour market that remains "
    "tight. Officials noted that growth had slowed in the second quarter but argued that the economy was "
    "resilient enough to absorb higher borrowing costs for longer. Several members of the committee wanted "
    "a cut, but the majority preferred to wait for more evidence that price pressures were easing."
)
EN_B = (
    "Heavy snow closed the main mountain pass on Sunday night, stranding hundreds of lorries and forcing "
    "the regional authorities to open emergency shelters in three villages along the motorway."
)
EN_C = (
    "The football club confirmed the signing of a young striker from the Dutch league on a five-year "
    "contract, ending a transfer saga that had dragged on for most of the summer window."
)
ZH_A = (
    "国家统计局周二公布的数据显示，今年前三个季度全国居民人均可支配收入实际增长百分之五点二，"
    "增速比上半年加快零点三个百分点。其中城镇居民收入增长较快，农村居民收入增长略慢，但城乡收入差距继续缩小。"
    "专家表示，消费市场稳步恢复，服务消费成为拉动增长的主要力量，旅游、餐饮和文化娱乐等行业的收入明显回升。"
    "不过，部分企业经营仍然面临困难，就业压力依然存在，下一阶段需要继续加大政策支持力度，稳定市场预期。"
)
ZH_B = (
    "本市气象台今天上午发布暴雨黄色预警信号，预计未来六小时内全市大部分地区将出现强降雨，局部地区伴有雷电和短时大风。"
    "市防汛指挥部要求各区做好低洼地带的排水准备，地铁和公交部门也将根据雨情调整运营安排。"
    "市民出行请注意安全，尽量避免前往河道和山区等危险区域。"
)

# (doc_id, lang, title, content), in processing order.
ROWS = [
    ("e1", "en", "Rates on hold", EN_A),
    ("z1", "zh", "前三季度居民收入增长", ZH_A),
    ("e2", "en", "Snow closes pass", EN_B),
    ("z2", "zh", "暴雨预警", ZH_B),
    ("e3", "en", "Rates on hold", EN_A),  # exact copy of e1
    ("z3", "zh", "前三季度居民收入增长", ZH_A),  # exact copy of z1
    ("e4", "en", "Rates on hold", EN_A.replace("persistent", "stubborn")),  # one word changed
    ("z4", "zh", "前三季度居民收入增长", ZH_A.replace("稳步恢复", "逐步恢复")),  # one word changed
    ("e5", "en", "Markets wrap", ""),  # empty content
    ("z5", "zh", "快讯", None),  # null content
    ("x1", "en", None, ""),  # nothing at all
    ("e6", "en", "Striker signs", EN_C),
]
ORIGINALS = ["e1", "z1", "e2", "z2", "e6"]
EXACT_COPIES = {"e3": "e1", "z3": "z1"}
NEAR_COPIES = {"e4": "e1", "z4": "z1"}


@pytest.fixture(scope="module")
def docs() -> pd.DataFrame:
    start = pd.Timestamp("2024-05-01 10:00", tz="UTC")
    return pd.DataFrame(
        {
            "doc_id": [r[0] for r in ROWS],
            "url": [f"https://news.example.com/{r[0]}" for r in ROWS],
            "title": [r[2] for r in ROWS],
            "content": [r[3] for r in ROWS],
            "fetched_at": [start + pd.Timedelta(seconds=i) for i in range(len(ROWS))],
            "lang": [r[1] for r in ROWS],
        }
    )


@pytest.fixture(scope="module")
def results(docs) -> dict[str, pd.DataFrame]:
    return {name: peers.run_peer(name, docs) for name in peers.available_peers()}


def _by_id(frame: pd.DataFrame) -> dict[str, dict]:
    return {row["doc_id"]: row for row in frame.to_dict("records")}


def test_core_peers_available_and_registered():
    available = peers.available_peers()
    assert set(available) <= set(peers.PEERS)
    assert {"md5", "datasketch_lsh", "datasketch_lsh_verified", "simhash"} <= set(available)
    assert all(callable(runner) for runner in peers.PEERS.values())
    versions = peers.peer_versions()
    assert versions["datasketch"] == "2.0.0"


def test_unknown_peer_is_rejected(docs):
    with pytest.raises(KeyError):
        peers.run_peer("no-such-peer", docs)


@pytest.mark.parametrize("name", peers.available_peers())
def test_one_row_per_doc_in_input_order(name, docs, results):
    out = results[name]
    assert list(out.columns) == ["doc_id", "action", "layer", "matched_doc_id", "score"]
    assert out["doc_id"].tolist() == docs["doc_id"].tolist()
    assert set(out["action"]) <= {"keep", "drop"}
    assert (out["layer"] == name).all()


@pytest.mark.parametrize("name", peers.available_peers())
def test_keeps_first_and_drops_exact_copy_naming_it(name, results):
    rows = _by_id(results[name])
    for doc_id in ORIGINALS:
        assert rows[doc_id]["action"] == "keep", (name, doc_id)
    for copy, original in EXACT_COPIES.items():
        assert rows[copy]["action"] == "drop", (name, copy)
        assert rows[copy]["matched_doc_id"] == original, (name, copy)


@pytest.mark.parametrize("name", peers.available_peers())
def test_every_match_is_an_earlier_kept_doc(name, results):
    out = results[name]
    order = {doc_id: i for i, doc_id in enumerate(out["doc_id"])}
    rows = _by_id(out)
    for row in rows.values():
        if row["action"] == "keep":
            assert pd.isna(row["matched_doc_id"]) and pd.isna(row["score"]), (name, row)
            continue
        match = row["matched_doc_id"]
        if pd.isna(match):
            # Only text-dedup removes documents without a match (its min_length filter).
            assert name == "text_dedup_minhash", (name, row)
            continue
        assert order[match] < order[row["doc_id"]], (name, row)
        assert rows[match]["action"] == "keep", (name, row)


@pytest.mark.parametrize("name", ["datasketch_lsh", "datasketch_lsh_verified", "rensa_lsh"])
def test_minhash_peers_drop_near_copies(name, results):
    if name not in results:
        pytest.skip(f"{name} not available here")
    rows = _by_id(results[name])
    for copy, original in NEAR_COPIES.items():
        assert rows[copy]["action"] == "drop", (name, copy)
        assert rows[copy]["matched_doc_id"] == original, (name, copy)
        assert rows[copy]["score"] >= 0.8, (name, copy)


@pytest.mark.parametrize("name", peers.available_peers())
def test_empty_documents_are_decisions_not_crashes(name, results):
    rows = _by_id(results[name])
    if name == "text_dedup_minhash":
        # text-dedup's default min_length=5 removes the near-empty documents without a match.
        assert rows["x1"]["action"] == "drop" and pd.isna(rows["x1"]["matched_doc_id"])
    else:
        assert rows["x1"]["action"] == "keep", name
    assert {rows[d]["action"] for d in ("e5", "z5")} <= {"keep", "drop"}


def test_order_comes_from_the_frame_not_its_index(docs):
    shuffled_index = docs.set_axis(list(reversed(range(len(docs)))))
    out = peers.run_peer("md5", shuffled_index)
    assert out["doc_id"].tolist() == docs["doc_id"].tolist()
    assert _by_id(out)["e3"]["matched_doc_id"] == "e1"
