"""crawl-dedup: incremental multi-layer deduplication of web-crawl batches.

The library knows nothing of Airflow: ``pipeline.run_batch`` runs a batch through the cascade
(URL -> exact -> SimHash -> MinHash -> semantic) against a fingerprint ``Registry``.
"""

__version__ = "0.1.0"
