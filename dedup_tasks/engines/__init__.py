"""Engines that run the cascade past one process. ``spark`` runs it on Apache Spark (pyspark)."""
