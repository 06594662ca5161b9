"""Rebuild the shipped sample corpus from its two public sources (see SOURCES.md).

    python -m bench.sample_corpus.build --sotu GIT_DIR --classics GIT_DIR

``--sotu`` is a clone of github.com/stdlib-js/datasets-sotu (CC0 contents: U.S. State of the Union
addresses, public domain as works of the U.S. government), ``--classics`` a clone of
github.com/chinese-poetry/chinese-poetry (MIT; the Analects, Mencius, Great Learning and Doctrine of
the Mean, public-domain classical Chinese). Both are read with ``git show`` at the commits pinned
below, so the output is byte-identical however often it is rebuilt. Nothing here runs at demo or test
time: the JSONL files it writes are committed.

Articles are cut to news-article size: an address (one line of text upstream) is split into sentences
and regrouped into 3-paragraph articles of about 1,400 characters; a classical chapter's sections are
packed into articles of about 450 characters (one section per paragraph). Each article's title names
its source and part, its ``url`` is a stable fictional one on ``sample.invalid``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOTU_COMMIT = "3fe128bad40ad366f8696b7ca25f825ca36869ef"
CLASSICS_COMMIT = "99ebbef7e1345c0985c44b9fd96a3f9e776f117b"
# Twentieth- and twenty-first-century addresses: vocabulary closest to today's news.
SOTU_YEARS = (
    1913, 1918, 1923, 1934, 1941, 1947, 1953, 1961, 1966, 1970,
    1974, 1979, 1985, 1994, 1999, 2004, 2010, 2014, 2016, 2021,
)
EN_ARTICLES_PER_ADDRESS = 24
EN_TARGET_CHARS = 1400
ZH_TARGET_CHARS = 450
CLASSICS = (
    ("论语/lunyu.json", "论语"),
    ("四书五经/mengzi.json", "孟子"),
    ("四书五经/daxue.json", "大學"),
    ("四书五经/zhongyong.json", "中庸"),
)
_EN_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def _show(git_dir: Path, commit: str, path: str) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True, capture_output=True
    )
    return out.stdout.decode("utf-8")


def _sotu_articles(git_dir: Path) -> list[dict]:
    names = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "--name-only", SOTU_COMMIT, "data/"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    rows = []
    for year in SOTU_YEARS:
        path = next(n for n in names if n.startswith(f"data/{year}_") and n.endswith(".txt"))
        president = " ".join(w.capitalize() for w in Path(path).stem.split("_")[1:-1])
        sentences = [s.strip() for s in _EN_SENT.split(" ".join(_show(git_dir, SOTU_COMMIT, path).split())) if s.strip()]
        chunks: list[list[str]] = [[]]
        for s in sentences:
            if sum(map(len, chunks[-1])) >= EN_TARGET_CHARS:
                chunks.append([])
            chunks[-1].append(s)
        for part, chunk in enumerate(chunks[:EN_ARTICLES_PER_ADDRESS], 1):
            if len(chunk) < 3:
                continue
            third = max(1, len(chunk) // 3)
            paragraphs = [chunk[:third], chunk[third : 2 * third], chunk[2 * third :]]
            rows.append(
                {
                    "id": f"sotu-{year}-{part:02d}",
                    "corpus": "sample_sotu",
                    "lang": "en",
                    "title": f"{year} State of the Union address by {president}, part {part}",
                    "text": "\n\n".join(" ".join(p) for p in paragraphs if p),
                    "url": f"https://sample.invalid/sotu/{year}/{part}",
                    "source": f"stdlib-js/datasets-sotu@{SOTU_COMMIT[:12]}:{path}",
                }
            )
    return rows


def _classics_articles(git_dir: Path) -> list[dict]:
    rows = []
    for path, book in CLASSICS:
        data = json.loads(_show(git_dir, CLASSICS_COMMIT, path))
        for c, chapter in enumerate(data if isinstance(data, list) else [data], 1):
            packed: list[list[str]] = [[]]
            for section in chapter["paragraphs"]:
                if sum(map(len, packed[-1])) >= ZH_TARGET_CHARS:
                    packed.append([])
                packed[-1].append(section.strip())
            for part, sections in enumerate(packed, 1):
                rows.append(
                    {
                        "id": f"classics-{Path(path).stem}-{c:02d}-{part:02d}",
                        "corpus": "sample_classics",
                        "lang": "zh",
                        "title": f"{book}·{chapter['chapter']}（{part}）",
                        "text": "\n".join(sections),
                        "url": f"https://sample.invalid/classics/{Path(path).stem}/{c}/{part}",
                        "source": f"chinese-poetry/chinese-poetry@{CLASSICS_COMMIT[:12]}:{path}",
                    }
                )
    return rows


def _write(rows: list[dict], path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sample_corpus.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sotu", type=Path, required=True, help="git dir of stdlib-js/datasets-sotu")
    parser.add_argument("--classics", type=Path, required=True, help="git dir of chinese-poetry/chinese-poetry")
    args = parser.parse_args(argv)
    en, zh = _sotu_articles(args.sotu), _classics_articles(args.classics)
    _write(en, HERE / "corpora" / "en_sample_sotu.jsonl")
    _write(zh, HERE / "corpora" / "zh_sample_classics.jsonl")
    print(f"{len(en)} English and {len(zh)} Chinese articles")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
