"""The only place that knows about Airflow's context: turns a task's context into library calls.

DAG files call ``run_step(step, context)`` (and the other entry points here); everything else is plain
``dedup_tasks``. Each entry point fails its task at once, without retries, on an error no retry can fix
(``fails_fast``).
"""

from dedup_tasks.airflow_support.tasks import (
    FAIL_FAST_ERRORS,
    PARAM_SPECS,
    batch_id_for,
    batch_id_of,
    config_from_params,
    fails_fast,
    run_audit_week,
    run_compaction,
    run_sentence_pruning,
    run_step,
)

__all__ = [
    "FAIL_FAST_ERRORS", "PARAM_SPECS", "batch_id_for", "batch_id_of", "config_from_params", "fails_fast", "run_audit_week",
    "run_compaction", "run_sentence_pruning", "run_step",
]
