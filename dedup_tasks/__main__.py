import sys

from dedup_tasks.cli import main

sys.exit(main())
