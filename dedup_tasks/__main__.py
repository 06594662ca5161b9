import sys

# Before the CLI's imports (this module imports neither numpy nor pyarrow): OpenBLAS's idle threads
# sleep at once (runtime.quiet_blas_threads), and start-up runs without the cyclic collector
# (runtime.pause_gc).
from dedup_tasks.runtime import pause_gc, quiet_blas_threads

quiet_blas_threads()
pause_gc()

from dedup_tasks.cli import main  # noqa: E402

sys.exit(main())
