"""The docs stay references: every setting documented, page sizes bounded, results quoted, no session talk."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from dedup_tasks.config import DedupConfig

REPO = Path(__file__).resolve().parent.parent
SETTING_ROW = re.compile(r"^\| `([a-z_0-9]+)` \|", re.M)
# Pages being rewritten into references by their own issues (#42, #43); drop them from this tuple once
# they are, and every check below covers them too.
IN_REWRITE = ("semantic.md", "near-copies.md")


def test_every_setting_is_in_the_configuration_table_and_no_stale_one() -> None:
    documented = SETTING_ROW.findall((REPO / "docs" / "configuration.md").read_text())
    fields = [f.name for f in dataclasses.fields(DedupConfig)]
    assert len(documented) == len(set(documented)), "a setting is documented twice"
    missing = sorted(set(fields) - set(documented))
    stale = sorted(set(documented) - set(fields))
    assert not missing, f"DedupConfig fields missing from docs/configuration.md: {missing}"
    assert not stale, f"docs/configuration.md documents settings DedupConfig no longer has: {stale}"


def test_the_table_gives_each_setting_its_default() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z_0-9]+)` \|[^\n]*", text, re.M)}
    for f in dataclasses.fields(DedupConfig):
        cells = [c.strip() for c in rows[f.name].strip("|").split("|")]
        assert len(cells) == 4 and all(cells), f"{f.name}: a row needs setting, default, what, measured by"


def test_readme_and_docs_pages_stay_short() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 250
    long = {
        p.name: n
        for p in (REPO / "docs").glob("*.md")
        if p.name not in IN_REWRITE and (n := len(p.read_text().splitlines())) > 450
    }
    assert not long


def _quoting_text() -> str:
    return "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])


def test_every_result_file_is_quoted_by_the_readme_or_a_docs_page() -> None:
    results = sorted(p.name for p in (REPO / "bench" / "results").iterdir() if not p.name.startswith("."))
    assert len(results) <= 30
    text = _quoting_text()
    unquoted = [name for name in results if name not in text]
    assert not unquoted, f"bench/results files no README or docs page quotes: {unquoted}"


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git checkout")
def test_no_file_refers_to_a_session() -> None:
    found = subprocess.run(
        ["git", "grep", "-n", "-i", "-E", r"session[s]? [0-9]", "--", ".", *(f":!docs/{page}" for page in IN_REWRITE)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert found.returncode == 1, found.stdout[:2000]
