"""`python -m dedup_tasks.warmup` (run by `make install`) leaves kernels a new process loads from the cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dedup_tasks.warmup import warm_up

REPO = Path(__file__).resolve().parents[1]


def test_a_second_process_loads_every_kernel_from_the_cache() -> None:
    first = warm_up()  # compiles (and caches) whatever this checkout has not cached yet
    assert first["loaded_from_cache"] + first["compiled"] > 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "dedup_tasks.warmup"], cwd=REPO, env=env, check=True, capture_output=True, text=True
    ).stdout
    assert ", 0 compiled and cached" in out, out
    assert not out.startswith("numba warm-up: 0 kernel"), out


def test_bytecode_is_written_even_where_python_would_not() -> None:
    cache = REPO / "dedup_tasks" / "__pycache__"
    for pyc in cache.glob("cli.*.pyc"):
        pyc.unlink()
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    code = "from dedup_tasks.warmup import compile_bytecode; print(compile_bytecode())"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True, capture_output=True, text=True).stdout
    assert int(out.split()[-1]) >= 1
    assert list(cache.glob("cli.*.pyc"))
