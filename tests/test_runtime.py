import os
import subprocess
import sys

import pytest

PROBE = "import pyarrow as pa; from dedup_tasks.runtime import use_shared_allocator; use_shared_allocator(); print(pa.default_memory_pool().backend_name)"


def _backend(env_pool: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env_pool:
        env["ARROW_DEFAULT_MEMORY_POOL"] = env_pool
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_arrow_allocates_from_the_c_heap_by_default():
    assert _backend(None) == "system"


@pytest.mark.parametrize("pool", ["jemalloc", "mimalloc"])
def test_an_explicit_arrow_pool_is_respected(pool):
    import pyarrow as pa

    available = {"jemalloc": pa.jemalloc_memory_pool, "mimalloc": pa.mimalloc_memory_pool}[pool]
    try:
        available()
    except NotImplementedError:
        pytest.skip(f"pyarrow built without {pool}")
    assert _backend(pool) == pool


def test_the_cli_sets_it(tmp_path):
    probe = f"import pyarrow as pa, dedup_tasks.cli as c; c.main(['show', '--root', {str(tmp_path)!r}]); print(pa.default_memory_pool().backend_name)"
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "system"


PROCESS_PROBE = """
import os, sys
from dedup_tasks.runtime import process_settings
process_settings()
import numpy as np
from dedup_tasks.fingerprint import kernels
kernels.band_keys(np.zeros((2, 6), np.uint32), 2, 3)
print(os.environ["OMP_WAIT_POLICY"], "scipy.linalg" in sys.modules)
import scipy.linalg.cython_blas
print("importable")
"""


@pytest.mark.parametrize("policy", [None, "ACTIVE"])
def test_process_settings_quiet_thread_pools_and_skip_the_blas_probe(policy):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run([sys.executable, "-c", PROCESS_PROBE], env=env, capture_output=True, text=True, check=True).stdout.split()
    # A parallel kernel ran without numba importing scipy.linalg, which others can still import.
    assert out == [policy or "PASSIVE", "False", "importable"]


CFFI_PROBE = """
import sys
from dedup_tasks.runtime import process_settings
process_settings()
import numpy as np
from dedup_tasks.fingerprint import kernels
kernels.band_keys(np.zeros((2, 6), np.uint32), 2, 3)
print("pycparser" in sys.modules, "cffi" in sys.modules)
import cffi
cffi.FFI()
print("importable")
"""


def test_process_settings_skip_numba_cffi_support():
    pytest.importorskip("cffi")
    out = subprocess.run([sys.executable, "-c", CFFI_PROBE], capture_output=True, text=True, check=True).stdout.split()
    # A kernel ran without numba building a cffi.FFI (pycparser); cffi is importable for others.
    assert out == ["False", "False", "importable"]


GC_PROBE = """
import gc, sys
from dedup_tasks.runtime import pause_gc
pause_gc()  # what python -m dedup_tasks does before importing the CLI
import dedup_tasks.cli as cli
import pyarrow.parquet as pq
from dedup_tasks.warmup import _batch
print("GC", gc.isenabled())
pq.write_table(_batch(), sys.argv[1] + "/hour.parquet")
args = {"run": ["run", "--input", sys.argv[1] + "/hour.parquet", "--out", sys.argv[1] + "/out", "--no-registry",
                "--layers", "url,exact,simhash,minhash", "--no-progress"], "show": ["show", "--root", sys.argv[1]]}
rc = cli.main(args[sys.argv[2]])
print("GC", rc, gc.isenabled(), gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize("command", ["run", "show"])
def test_the_cli_runs_its_start_up_without_the_collector_and_resumes_it(tmp_path, command):
    out = subprocess.run([sys.executable, "-c", GC_PROBE, str(tmp_path), command], capture_output=True, text=True, check=True).stdout
    lines = [line.split()[1:] for line in out.splitlines() if line.startswith("GC ")]
    # Off through the imports; on again (what existed then frozen) once the first hour is done, or
    # right away for a command that runs no hour (show fails here: nothing was published).
    assert lines == [["False"], ["0" if command == "run" else "2", "True", "True"]]


def test_resume_gc_leaves_a_collector_it_did_not_turn_off_alone():
    probe = "import gc; gc.disable(); from dedup_tasks.runtime import resume_gc; resume_gc(); print(gc.isenabled(), gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "0"]


BLAS_PROBE = """
import os, runpy, sys
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not seen:
            seen.append(os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
        return None
sys.meta_path.insert(0, Spy())
sys.argv = ["dedup_tasks", "show", "--root", sys.argv[1]]
try:
    runpy.run_module("dedup_tasks", run_name="__main__")
except SystemExit:
    pass
print("BLAS", seen)
"""


@pytest.mark.parametrize("given", [None, "20"])
def test_the_cli_entry_point_quiets_blas_threads_before_numpy_is_imported(tmp_path, given):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE, str(tmp_path)], env=env, capture_output=True, text=True, check=True).stdout
    assert [line for line in out.splitlines() if line.startswith("BLAS ")] == [f"BLAS [{given or '4'!r}]"]


PANDAS_PROBE = """
import sys
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from dedup_tasks.runtime import skip_pyarrow_pandas_probe
skip_pyarrow_pandas_probe()
t = pa.table({"a": pa.array([1, 2, None]), "b": pa.array(np.arange(3))})
pc.greater(t.column("a"), 1).to_numpy(zero_copy_only=False), t.column("b").to_numpy(), pa.scalar(1)
print("pandas" in sys.modules)
print(t.to_pandas()["b"].sum())
"""


def test_the_pyarrow_pandas_probe_runs_with_pandas_hidden_and_pandas_stays_importable():
    out = subprocess.run([sys.executable, "-c", PANDAS_PROBE], capture_output=True, text=True, check=True).stdout.split()
    # pyarrow's conversions ran without importing pandas; to_pandas still imports and uses it.
    assert out == ["False", "3"]


# The CLI as a user runs it, reporting at exit which heavy modules the run imported.
CLI_MODULES = """
import atexit, runpy, sys
atexit.register(lambda: print("MODULES", "pandas" in sys.modules, "pyarrow.pandas_compat" in sys.modules))
sys.argv = ["dedup_tasks", *sys.argv[1:]]
runpy.run_module("dedup_tasks", run_name="__main__")
"""


def test_an_l1_l3_run_never_imports_pandas_and_decides_as_in_process(tmp_path, en_articles):
    import pyarrow.parquet as pq

    from dedup_tasks.config import DedupConfig
    from dedup_tasks.io import BatchPaths
    from dedup_tasks.pipeline import run_partition
    from dedup_tasks.registry.base import MemoryRegistry
    from tests.conftest import REPO, make_batch

    rows = [{"doc_id": f"d{i}", "url": f"https://a.com/{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(en_articles[:40])]
    rows.append(dict(rows[0], doc_id="exact", url="https://b.com/x"))
    rows.append(dict(rows[1], doc_id="near", url="https://b.com/y", content=rows[1]["content"].replace(".", ";", 2) + " Extra line."))
    rows.append(dict(rows[2], doc_id="same-url"))
    src = tmp_path / "in" / "hour.parquet"
    src.parent.mkdir()
    pq.write_table(make_batch(rows), src)
    layers = "url,exact,simhash,minhash"
    args = ["run", "--input", str(src), "--out", str(tmp_path / "cli"), "--layers", layers, "--no-registry", "--no-progress"]
    out = subprocess.run([sys.executable, "-c", CLI_MODULES, *args], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.splitlines()[-1] == "MODULES False False"

    # The same hour in this process (pandas imported): the same decisions and kept rows.
    config = DedupConfig.load({"layers": layers, "root": str(tmp_path / "lib")})
    paths = BatchPaths(tmp_path / "lib", "hour", input_override=src)
    run_partition(paths, config, MemoryRegistry())
    ran = BatchPaths(tmp_path / "cli", "hour", input_override=src)
    decisions = pq.read_table(ran.decisions)
    assert decisions.num_rows == len(rows) and set(decisions.column("action").to_pylist()) == {"keep", "drop"}
    assert decisions.equals(pq.read_table(paths.decisions))
    assert pq.read_table(ran.deduped).equals(pq.read_table(paths.deduped))
