"""`dedup_tasks.kernel_cache`: a cached kernel is recompiled when a kernel it calls changes in another file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from numba.core.registry import CPUDispatcher

import dedup_tasks.kernel_cache as kernel_cache

REPO = Path(__file__).resolve().parents[1]

CALLEE = "from numba import njit\n\n\n@njit(cache=True)\ndef callee():\n    return {value}\n"
CALLER = "from numba import njit\n\nimport callee_mod\n\n\n@njit(cache=True)\ndef caller():\n    return callee_mod.callee() + 10\n"
RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    here = Path(sys.argv[1])
    sys.path.insert(0, str(here))
    if sys.argv[2] == "group":
        from dedup_tasks.kernel_cache import install
        install([here / "callee_mod.py", here / "caller_mod.py"])
    import caller_mod
    print(caller_mod.caller())
    """
)


def _caller_after_callee_changes(tmp_path: Path, mode: str) -> list[int]:
    """The caller's result in a fresh process before and after the callee's file changes."""
    (tmp_path / "callee_mod.py").write_text(CALLEE.format(value=1))
    (tmp_path / "caller_mod.py").write_text(CALLER)
    (tmp_path / "run.py").write_text(RUN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NUMBA_CACHE_DIR", None)

    def run() -> int:
        out = subprocess.run(
            [sys.executable, str(tmp_path / "run.py"), str(tmp_path), mode],
            env=env, check=True, capture_output=True, text=True,
        )
        return int(out.stdout.strip())

    before = run()
    (tmp_path / "callee_mod.py").write_text(CALLEE.format(value=2))
    return [before, run()]


def test_plain_numba_keeps_the_old_callee(tmp_path: Path) -> None:
    # What the module exists for: numba stamps the caller with its own file only.
    assert _caller_after_callee_changes(tmp_path, "plain") == [11, 11]


def test_group_stamp_recompiles_the_caller(tmp_path: Path) -> None:
    assert _caller_after_callee_changes(tmp_path, "group") == [11, 12]


def test_every_module_with_cached_kernels_is_in_the_group() -> None:
    package = REPO / "dedup_tasks"
    with_kernels = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if re.search(r"@njit\([^)]*cache=True", path.read_text(encoding="utf-8"))
    }
    assert with_kernels == set(kernel_cache.KERNEL_FILES)


@pytest.mark.parametrize("name", kernel_cache.KERNEL_FILES)
def test_every_kernel_is_stamped_by_the_group(name: str) -> None:
    import importlib

    module = importlib.import_module("dedup_tasks." + name.removesuffix(".py").replace("/", "."))
    kernels = [obj for obj in vars(module).values() if isinstance(obj, CPUDispatcher) and obj._cache is not None]
    assert kernels, name
    for kernel in kernels:
        if getattr(kernel._cache, "_impl", None) is None:  # a NullCache: cache=False
            continue
        assert type(kernel._cache._impl.locator).__name__.startswith("Group"), (name, kernel.__name__)
