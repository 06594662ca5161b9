"""The only place that knows about Airflow's context: turns a task's context into library calls.

DAG files call ``run_step(step, context)``; everything else is plain ``dedup_tasks``.
"""

from dedup_tasks.airflow_support.tasks import (
    PARAM_SPECS,
    batch_id_for,
    config_from_params,
    run_compaction,
    run_step,
)

__all__ = ["PARAM_SPECS", "batch_id_for", "config_from_params", "run_compaction", "run_step"]
