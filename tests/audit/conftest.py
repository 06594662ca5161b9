"""A generated week, run through the real cascade once per session and shared by the audit tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.audit.synth import config_for, run_week


@pytest.fixture(scope="session")
def week_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("audit-week")
    run_week(root, config_for(root))
    return root


@pytest.fixture(scope="session")
def week_decisions(week_root) -> pd.DataFrame:
    from dedup_tasks.audit.sampling import load_week_decisions

    return load_week_decisions(week_root, "2026-W49")
