"""No tracked file may name a path of the machine it was developed on.

A clean clone must work anywhere, and the research-only evaluation data must be found through
``bench.evaldata`` (``$DEDUP_EVAL_DATA``), never through a path written into a file. Two checks over
every file ``git ls-files`` lists:

* generic: an absolute path under a per-machine root (home directories, scratch and work areas,
  temp) at the start of a token, e.g. ``"/<root>/shared/data"`` in a string or a command;
* this machine: the resolved paths of this checkout, of its parent folder and of the evaluation
  data folder, wherever they run (so a CI checkout under any root is covered too).

The prefixes are assembled from pieces so this file does not contain what it looks for.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bench.evaldata import eval_data_dir

REPO = Path(__file__).resolve().parents[1]
_ROOTS = ("work", "root", "home", "tmp", "mnt", "Users", "scratch")
# A token starts at a line start, whitespace, a quote, '=', '(', '[', ',', ':' or a backtick, so
# relative paths such as bench/<x>/ or <root>/<x>/ never match.
GENERIC = re.compile(r"(?:^|(?<=[\s\"'=(\[,:`]))/(?:" + "|".join(_ROOTS) + r")/[\w.-]", re.MULTILINE)
# Vendored WHATWG URL test vectors: the paths inside their file: and http: URLs are test inputs,
# not paths of this machine. They are still checked for this machine's own paths.
GENERIC_EXEMPT = {"tests/normalize/data/whatwg_urltestdata_cases.json"}


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout ({exc}): nothing to scan")
    return [p for p in out.decode().split("\0") if p]


def machine_paths() -> list[str]:
    paths = {str(REPO), str(REPO.parent), str(eval_data_dir().resolve())}
    # '/' or a one-level root such as '/src' would match everywhere: keep paths two levels deep.
    return sorted(p for p in paths if p.count("/") >= 2)


def offending_lines(text: str, generic: bool, own: list[str]) -> list[str]:
    hits = []
    for n, line in enumerate(text.splitlines(), 1):
        if (generic and GENERIC.search(line)) or any(p + "/" in line or line.endswith(p) for p in own):
            hits.append(f"{n}: {line.strip()[:160]}")
    return hits


def test_pattern_catches_machine_paths_and_spares_relative_ones() -> None:
    planted = "/".join(["", "work", "shared", "data", "corpora"])
    assert offending_lines(f'DATA = Path("{planted}")', True, [])
    assert offending_lines(f"python -m bench --root {planted}", True, [])
    assert offending_lines(f"`{planted}`", True, [])
    assert offending_lines(f"x {REPO}/bench/corpus.py", False, [str(REPO)])
    assert not offending_lines("bench/work/ and <root>/work/batch_id=1/ and ../shared/data", True, [])
    assert not offending_lines("https://example.com/home/page", True, [])


def test_no_tracked_file_contains_an_absolute_machine_path() -> None:
    own = machine_paths()
    bad = {}
    for rel in tracked_files():
        path = REPO / rel
        if not path.is_file():
            continue  # deleted in the work tree, not yet committed
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (Parquet, images)
        hits = offending_lines(data.decode("utf-8", "replace"), rel not in GENERIC_EXEMPT, own)
        if hits:
            bad[rel] = hits[:3]
    assert not bad, f"absolute machine paths in tracked files (use a relative path or $DEDUP_EVAL_DATA): {bad}"
