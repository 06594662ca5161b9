"""Training a cross-encoder from labelled pairs (embed.cross_training) and its command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from dedup_tasks.cli import main  # noqa: E402
from dedup_tasks.embed.cross_encoder import CrossEncoder  # noqa: E402
from dedup_tasks.embed.cross_training import PairsError, read_pairs, save, train  # noqa: E402

SAME = [("The council approved the budget on Tuesday.", "On Tuesday the council passed the budget."),
        ("Shares of Northwind fell 14 percent.", "Northwind stock dropped 14 percent."),
        ("The capsule landed on its side.", "The capsule came down on its side."),
        ("Rain is expected in the north tomorrow.", "Tomorrow the north should see rain.")]
OTHER = [("The council approved the budget on Tuesday.", "A rare orchid was found on a cliff."),
         ("Shares of Northwind fell 14 percent.", "The museum opens a new wing in May."),
         ("The capsule landed on its side.", "Bus fares rise by ten cents next year."),
         ("Rain is expected in the north tomorrow.", "The striker signed a three-year contract.")]


def write_pairs(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_pairs_files_take_labels_or_scores_and_name_a_bad_line(tmp_path) -> None:
    labelled = tmp_path / "labelled.jsonl"
    write_pairs(labelled, [{"text1": a, "text2": b, "label": 1} for a, b in SAME] + [{"text1": a, "text2": b, "label": 0} for a, b in OTHER])
    a, b, y = read_pairs(labelled)
    assert len(a) == 8 and y.tolist() == [True] * 4 + [False] * 4
    scored = tmp_path / "scored.jsonl"
    write_pairs(scored, [{"text1": "x", "text2": "y", "label": s} for s in (5.0, 4.0, 3.2, 1.0)])
    assert read_pairs(scored, min_score=4.0)[2].tolist() == [True, True, False, False]
    assert read_pairs(scored, min_score=4.0, max_negative=3.0)[2].tolist() == [True, True, False]  # 3.2 left out
    with pytest.raises(PairsError, match="line 1: label 5 is not 0 or 1"):
        read_pairs(scored)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text1": "a", "text2": "b", "label": 1}\n{"text1": "a"}\n', encoding="utf-8")
    with pytest.raises(PairsError, match="bad.jsonl, line 2"):
        read_pairs(bad)


def test_a_few_steps_move_the_logits_and_the_file_loads_back(tmp_path) -> None:
    a = [p[0] for p in SAME + OTHER]
    b = [p[1] for p in SAME + OTHER]
    y = np.array([True] * 4 + [False] * 4)
    cross = train(a * 2, b * 2, np.concatenate([y, y]), steps=12, batch=8, lr=1e-4, threads=1)
    logits = cross.logits(a, b)
    assert logits[:4].mean() > logits[4:].mean() + 0.5  # it learned its training pairs apart
    path = save(cross, tmp_path / "model.pt")
    assert not list(tmp_path.glob(".model.pt.tmp*"))  # written, then renamed
    loaded = CrossEncoder(path)
    assert np.allclose(loaded.logits(a, b), logits, atol=1e-3)
    with pytest.raises(ValueError, match="positive and negative"):
        train(a, b, np.ones(8, bool), steps=1, batch=4)


def test_the_command_line_trains_writes_and_refuses_bad_input(tmp_path, capsys) -> None:
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(pairs, [{"text1": a, "text2": b, "label": 1} for a, b in SAME] + [{"text1": a, "text2": b, "label": 0} for a, b in OTHER])
    out = tmp_path / "cross.pt"
    assert main(["cross-encoder", "train", "--pairs", str(pairs), "--out", str(out), "--steps", "2", "--batch", "4"]) == 0
    assert CrossEncoder(out).model_id in capsys.readouterr().out
    assert main(["cross-encoder", "train", "--pairs", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
