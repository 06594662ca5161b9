import sys

# Before the CLI's imports: start-up runs without the cyclic collector (runtime.pause_gc).
from dedup_tasks.runtime import pause_gc

pause_gc()

from dedup_tasks.cli import main  # noqa: E402

sys.exit(main())
