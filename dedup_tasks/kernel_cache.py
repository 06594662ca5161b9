"""Key the numba cache of every kernel of this package on all of the package's kernel files.

Numba stamps a cached kernel with its *own* source file only. A kernel that calls a kernel of another
file (``candidates._stream`` calls ``numbers.facts_differ``) keeps the callee's old machine code
inlined after that other file changes: an upgrade in place (``git pull``, a new wheel over an old
``__pycache__``) would silently keep deciding by the old rules. Importing this module, which every
module with ``cache=True`` kernels does before defining them, puts three locators in front of numba's:
for the files in ``KERNEL_FILES`` the stamp is a digest of all of them, so changing any kernel file
recompiles every kernel once (``python -m dedup_tasks.warmup`` does it ahead of time).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from numba.core import caching

PACKAGE_DIR = Path(__file__).resolve().parent

# Every module of the package with a cache=True kernel (tests/test_kernel_cache.py checks the list).
KERNEL_FILES: tuple[str, ...] = (
    "engines/pairs.py",
    "fingerprint/candidates.py",
    "fingerprint/kernels.py",
    "fingerprint/leadin.py",
    "fingerprint/numbers.py",
    "fingerprint/stoplist.py",
    "normalize/codepoint_kernels.py",
    "normalize/fold.py",
    "registry/_bandblocks.py",
    "registry/_bandjoin.py",
    "registry/_sigpack.py",
)


def group_stamp(paths: Sequence[Path]) -> bytes:
    """One digest over the files' contents (numba's own per-file digest, memoized on mtime and size)."""
    digest = hashlib.sha256()
    for path in paths:
        st = os.stat(path)
        digest.update(caching._hash_source_file(str(path), st.st_mtime, st.st_size))
    return digest.digest()


def group_locators(files: Sequence[Path]) -> list[type]:
    """Locator classes that stamp a kernel of any of ``files`` with ``group_stamp(files)``."""
    members = frozenset(os.path.realpath(f) for f in files)
    ordered = tuple(sorted(Path(f) for f in members))

    class _GroupStamp:
        @classmethod
        def from_function(cls, py_func, py_file):  # noqa: ANN001, ANN206 (numba's signature)
            if os.path.realpath(py_file) not in members:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self) -> bytes:
            return group_stamp(ordered)

    # numba's own order: NUMBA_CACHE_DIR when set, else the module's __pycache__, else the user's cache.
    bases = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)
    return [type(f"Group{base.__name__}", (_GroupStamp, base), {}) for base in bases]


def install(files: Sequence[Path]) -> None:
    """Put the group's locators first in numba's list (idempotent per group)."""
    key = frozenset(os.path.realpath(f) for f in files)
    current = caching.CacheImpl._locator_classes
    if any(getattr(cls, "_group_key", None) == key for cls in current):
        return
    locators = group_locators(files)
    for cls in locators:
        cls._group_key = key
    caching.CacheImpl._locator_classes = [*locators, *current]


install([PACKAGE_DIR / name for name in KERNEL_FILES])
