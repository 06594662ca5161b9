"""ISO weeks: which hourly partitions belong to an audit week, and where its outputs go."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

_WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")


def parse_week(week: str) -> tuple[date, date]:
    """'2026-W49' -> (Monday, Sunday) of that ISO week; raise ValueError naming the value otherwise."""
    m = _WEEK_RE.match(week.strip())
    if not m:
        raise ValueError(f"week {week!r}: expected an ISO week like 2026-W49")
    try:
        monday = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError as exc:
        raise ValueError(f"week {week!r}: {exc}") from exc
    return monday, monday + timedelta(days=6)


def week_of(moment: date | datetime) -> str:
    """The ISO week string of a date or datetime (the DAG passes its data_interval_start)."""
    year, number, _ = moment.isocalendar()
    return f"{year}-W{number:02d}"


def week_days(week: str) -> list[str]:
    monday, _ = parse_week(week)
    return [(monday + timedelta(days=i)).isoformat() for i in range(7)]


def audit_dir(root: Path | str, week: str) -> Path:
    parse_week(week)
    return Path(root) / "audit" / f"week={week}"


def list_audit_weeks(root: Path | str) -> list[str]:
    """Weeks with a written report under ROOT/audit, newest first."""
    base = Path(root) / "audit"
    if not base.is_dir():
        return []
    weeks = [p.name.split("=", 1)[1] for p in base.glob("week=*") if (p / "report.html").exists()]
    return sorted(weeks, reverse=True)


def decision_partitions(root: Path | str, week: str) -> list[tuple[str, Path]]:
    """(batch_id, partition dir) of every decisions hour whose dt falls in the week, in time order."""
    out = []
    for day in week_days(week):
        day_dir = Path(root) / "decisions" / f"dt={day}"
        for hour_dir in sorted(day_dir.glob("hour=*")):
            if any(hour_dir.glob("*.parquet")):
                out.append((f"{day}T{hour_dir.name.split('=', 1)[1]}", hour_dir))
    return out
