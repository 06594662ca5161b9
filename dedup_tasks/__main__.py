import sys

# Before the CLI's imports (this module imports neither numpy nor pyarrow): OpenBLAS's idle threads
# sleep at once (runtime.quiet_blas_threads), and start-up runs without the cyclic collector
# (runtime.pause_gc); a run without L4 never imports pandas (runtime.skip_pyarrow_pandas_probe).
from dedup_tasks.runtime import mark_entry_point, pause_gc, quiet_blas_threads

quiet_blas_threads()
pause_gc()
mark_entry_point()  # the process ends with the command (runtime.skip_pyarrow_pandas_probe)

from dedup_tasks.cli import main  # noqa: E402

sys.exit(main())
