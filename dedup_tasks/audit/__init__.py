"""Weekly audit of the dedup decisions: stratified samples, labels, precision, what-if, report.

No Airflow imports here: the DAG (dags/dedup_audit.py) and the UI plugin (plugins/) call into it.
Names are imported lazily so `python -m dedup_tasks run` does not pay for pandas/psycopg2 here.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AuditResult": "dedup_tasks.audit.run",
    "import_labels": "dedup_tasks.audit.run",
    "load_audit": "dedup_tasks.audit.run",
    "render_week": "dedup_tasks.audit.run",
    "run_audit": "dedup_tasks.audit.run",
    "audit_dir": "dedup_tasks.audit.weeks",
    "list_audit_weeks": "dedup_tasks.audit.weeks",
    "parse_week": "dedup_tasks.audit.weeks",
    "week_of": "dedup_tasks.audit.weeks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'dedup_tasks.audit' has no attribute {name!r}")
