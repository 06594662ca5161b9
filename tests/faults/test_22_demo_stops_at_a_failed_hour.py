"""Row 22: ``make demo`` (scripts/demo.sh) stops at the first failed hour and prints which task failed
and its one error line, not the whole Airflow log, and exits non-zero. Before, it waited out the
task's retries (about five minutes) and the reason was left at the end of a traceback in a log file."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO


def test_the_demo_stops_at_the_first_failed_hour_with_the_tasks_error(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "registry").write_text("a file where the embedded registry's folder goes")  # a permanent error
    env = {**os.environ, "PYTHONPATH": str(REPO), "DEDUP_ROOT": str(root), "AIRFLOW_HOME": str(tmp_path / "airflow"),
           "DEMO_DOCS": "40"}
    result = subprocess.run(["bash", "scripts/demo.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert out.count("== airflow dags test crawl_dedup") == 1, out  # hours 01 and 02 never started
    assert "task validate failed" in result.stderr, out
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "embedded registry" in errors[0], out
    assert "Traceback" not in out and len(result.stderr.splitlines()) <= 6, out
