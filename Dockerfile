# Airflow image with crawl-dedup installed (used by docker-compose.yml).
FROM apache/airflow:3.3.2-python3.11

USER root
# PostgreSQL client binaries let the registry's embedded fallback work inside the image as well.
# Java 17 for the Spark engine (the spark-master/spark-worker services run this image too).
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql postgresql-contrib openjdk-17-jre-headless \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
USER airflow

COPY --chown=airflow:root requirements.txt requirements-spark.txt /opt/crawl-dedup/
RUN pip install --no-cache-dir "apache-airflow==3.3.2" -r /opt/crawl-dedup/requirements.txt -r /opt/crawl-dedup/requirements-spark.txt
COPY --chown=airflow:root pyproject.toml README.md /opt/crawl-dedup/
COPY --chown=airflow:root dedup_tasks /opt/crawl-dedup/dedup_tasks
RUN pip install --no-cache-dir --no-deps /opt/crawl-dedup
