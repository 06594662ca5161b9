"""Process-wide settings for a process that runs batches: the CLI, an Airflow task, the benchmark."""

from __future__ import annotations

import os
import sys

import pyarrow as pa


def process_settings() -> None:
    """Every setting below; call it first thing, before any kernel runs."""
    use_shared_allocator()
    use_passive_thread_pools()
    skip_numba_blas_probe()


def use_shared_allocator() -> None:
    """Let Arrow allocate from the C heap numpy uses, unless ``ARROW_DEFAULT_MEMORY_POOL`` is set.

    With Arrow's default pool (mimalloc) Arrow and numpy each grow a heap of their own, so a batch
    faults in fresh pages for both; on one heap each reuses what the other freed. On the 2-core
    benchmark VM the first 20,000-document hour of a fresh process went from 21-23k to 27k docs/s
    (kernel time 0.37 -> 0.07 s) and peak RSS from 615 to 550 MiB (``python -m bench throughput``).
    """
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
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    sys.modules["scipy.linalg"] = None  # type: ignore[assignment]  # import fails fast: numba catches it
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        del sys.modules["scipy.linalg"]
