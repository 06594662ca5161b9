"""Research probes: measurements behind a rule or a constant, kept runnable but not part of the product's
benchmark. Each writes its result under ``bench/work/research/`` (not committed); see README.md here."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "work" / "research"
