"""Process-wide settings for a process that runs batches: the CLI, an Airflow task, the benchmark."""

from __future__ import annotations

import gc
import importlib
import os
import sys


def process_settings() -> None:
    """Every setting below; call it first thing, before any kernel runs."""
    use_shared_allocator()
    use_passive_thread_pools()
    skip_numba_blas_probe()
    skip_numba_cffi_support()


def use_shared_allocator() -> None:
    """Let Arrow allocate from the C heap numpy uses, unless ``ARROW_DEFAULT_MEMORY_POOL`` is set.

    With Arrow's default pool (mimalloc) Arrow and numpy each grow a heap of their own, so a batch
    faults in fresh pages for both; on one heap each reuses what the other freed. On the 2-core
    benchmark VM the first 20,000-document hour of a fresh process went from 21-23k to 27k docs/s
    (kernel time 0.37 -> 0.07 s) and peak RSS from 615 to 550 MiB (``python -m bench throughput``).
    """
    import pyarrow as pa

    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())


def use_passive_thread_pools() -> None:
    """OpenMP threads (numba's parallel kernels) sleep between kernels instead of spinning, unless
    ``OMP_WAIT_POLICY`` is set.

    A cascade launches ~100 parallel kernels; after each, libgomp's idle thread spins for a while.
    On a machine shared with other jobs that spinning is CPU time taken from them and from our own
    main thread: a 48-document batch cost 0.12-0.20 CPU-s spinning and 0.013 s passive, a 20k-doc
    hour 1.30-1.55 against 1.07-1.19 CPU-s at load average 7 (docs/performance.md). L4's embedder
    sets the same for its own libgomp (``embed.embedders``). Read when libgomp loads, i.e. at the
    first parallel kernel.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def skip_numba_blas_probe() -> None:
    """Spare numba's BLAS probe: its first kernel imports ``numba.np.arraymath``, which imports
    ``scipy.linalg`` (~0.2 CPU-s) only to learn whether ``np.dot`` can be compiled. No kernel of
    the cascade uses BLAS, so the probe runs once with ``scipy.linalg`` hidden and numba records
    "no BLAS" (``np.dot`` in nopython code would not compile in this process); ``scipy.linalg``
    itself stays importable for everything else (L4's libraries)."""
    _import_with_hidden("numba.np.arraymath", "scipy.linalg")


def skip_numba_cffi_support() -> None:
    """Spare numba's CFFI support: numba's first kernel imports ``numba.core.typing.cffi_utils``,
    which builds a ``cffi.FFI()`` and so imports pycparser (~0.04 CPU-s) to type calls of CFFI
    functions, which no kernel of the project makes. It is imported here with ``cffi`` hidden, so
    numba records "no CFFI" (calling a CFFI function from nopython code would not compile in this
    process); ``cffi`` itself stays importable."""
    _import_with_hidden("numba.core.typing.cffi_utils", "cffi")


def _import_with_hidden(module: str, hidden: str) -> None:
    """Import ``module`` while ``hidden`` cannot be imported (numba then records the feature as absent);
    ``hidden`` stays importable afterwards. Nothing happens when either is already imported."""
    if module in sys.modules or hidden in sys.modules:
        return
    sys.modules[hidden] = None  # type: ignore[assignment]  # import fails fast: numba catches it
    try:
        importlib.import_module(module)
    finally:
        del sys.modules[hidden]


class _Hidden:
    """A ``sys.meta_path`` finder under which ``name`` (and its submodules) cannot be imported. Not
    ``sys.modules[name] = None``: Cython's import helper returns that None instead of failing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden)", name=fullname)


# Set by mark_entry_point: this process is ``python -m dedup_tasks`` and ends when its command does.
_entry_point = False


def mark_entry_point() -> None:
    """Called by ``python -m dedup_tasks`` only: the process is ours and ends with the command, so
    settings that change pyarrow for the whole process (``skip_pyarrow_pandas_probe``) are allowed."""
    global _entry_point
    _entry_point = True


def is_entry_point() -> bool:
    return _entry_point


def skip_pyarrow_pandas_probe() -> None:
    """Spare pyarrow's pandas probe: the first ``pa.array``/``pa.scalar`` of anything (pyarrow's
    pandas shim asks whether pandas is there) and the first ``to_numpy`` (Arrow C++'s
    ``InitPandasStaticData``) import pandas (~0.16 CPU-s and ~30 MiB of peak RSS of a 20k-doc
    ``python -m dedup_tasks run``, docs/performance.md), which no L1-L3 step uses.
    Both probes run here once with pandas hidden, so pyarrow records "no pandas" as it does where
    pandas is not installed; pandas itself stays importable, and ``to_pandas`` still works (the
    shim imports pandas again when a call needs it).

    For a process that hands no pandas objects to pyarrow afterwards: Arrow C++ does not retry, so
    in this process ``pa.array`` no longer reads ``pd.NA``/``pd.NaT``/``pd.DateOffset`` values
    (conversions that raise instead) and ``pa.array(series)`` converts a Series as a plain sequence.
    The CLI calls it for ``run`` without L4 on the local engine (``cli.cmd_run``), only when it is
    the process's entry point. Nothing happens when pandas is already imported."""
    if "pandas" in sys.modules:
        return
    hidden = _Hidden("pandas")
    sys.meta_path.insert(0, hidden)
    try:
        import numpy as np
        import pyarrow as pa

        pa.array(np.zeros(1, np.int8)).to_numpy()  # the shim's probe, then Arrow C++'s
    finally:
        sys.meta_path.remove(hidden)


def quiet_blas_threads() -> None:
    """OpenBLAS's threads (numpy's BLAS) sleep as soon as they are idle, unless
    ``OPENBLAS_THREAD_TIMEOUT`` is set: effective only before numpy is imported, so the CLI's entry
    point calls it first thing (this module imports neither numpy nor pyarrow at import).

    OpenBLAS starts its thread pool when numpy is imported, and each idle thread spins for 2^28
    cycles before it sleeps: ~0.03 CPU-s of every process, though no L1-L3 kernel calls BLAS
    (``python -c "import numpy, pyarrow"``: 0.145 -> 0.114 CPU-s, median of 8). A later BLAS call
    (L4's libraries) wakes the threads as before."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


# Set by pause_gc, so resume_gc re-enables only a collector it turned off itself.
_gc_paused = False


def pause_gc() -> None:
    """Turn the cyclic garbage collector off for a process's start-up: the CLI's entry point calls it
    before importing anything, ``resume_gc`` after the first batch.

    Start-up allocates hundreds of thousands of long-lived objects (numpy, pyarrow, pandas, numba's
    typing and target contexts, each kernel loaded from the cache) and no garbage worth a collection;
    the collector still ran ~300 young and two full collections over them in a 20k-doc
    ``python -m dedup_tasks run`` (~0.08-0.1 CPU-s, docs/performance.md)."""
    global _gc_paused
    if gc.isenabled():
        gc.disable()
        _gc_paused = True


def resume_gc() -> None:
    """Turn the collector back on if ``pause_gc`` turned it off; what exists now is moved to the
    permanent generation (``gc.freeze``), so later full collections do not walk it again."""
    global _gc_paused
    if _gc_paused:
        _gc_paused = False
        gc.freeze()
        gc.enable()
