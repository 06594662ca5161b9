"""Benchmark and quality suite: synthetic crawl generator (``bench.generate``), scorer (``bench.score``)."""
