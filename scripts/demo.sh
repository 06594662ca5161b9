#!/usr/bin/env bash
# The main job end to end on the embedded defaults: three sample crawl hours through the crawl_dedup
# DAG (airflow dags test, a project-local AIRFLOW_HOME, an embedded PostgreSQL registry under ./data).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
export DEDUP_ROOT="${DEDUP_ROOT:-$PWD/data}"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/airflow_home}"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$PWD/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
unset DEDUP_DB_URL AIRFLOW_CONN_DEDUP_DB  # the demo uses the embedded registry

DEMO_DOCS="${DEMO_DOCS:-600}"
# Built from the sample corpus shipped in bench/sample_corpus (public-domain texts): nothing beside
# the clone is needed, and the demo prints the same numbers on every machine.
echo "== sample crawl: 3 hours x $DEMO_DOCS docs under $DEDUP_ROOT/crawl (source: bench/sample_corpus)"
"$PYTHON" -m bench.generate --source sample --docs "$DEMO_DOCS" --hours 3 --seed 0 --out "$DEDUP_ROOT" >/dev/null
echo "== Airflow metadata DB in $AIRFLOW_HOME"
"$PYTHON" -m airflow db migrate >/dev/null
"$PYTHON" -m airflow dags reserialize >/dev/null
for hour in 00 01 02; do
  # A manual run covers the hour that ends at its logical date.
  next=$(printf "%02d" $((10#$hour + 1)))
  echo "== airflow dags test crawl_dedup 2026-12-01T${next}:00:00+00:00  (batch 2026-12-01T${hour})"
  "$PYTHON" -m airflow dags test crawl_dedup "2026-12-01T${next}:00:00+00:00" >"$AIRFLOW_HOME/dags-test-$hour.log" 2>&1 \
    || { tail -50 "$AIRFLOW_HOME/dags-test-$hour.log"; exit 1; }
done
# 2026-12-01 lies in ISO week 2026-W49: the week the audit command below reads.
"$PYTHON" scripts/demo_report.py --root "$DEDUP_ROOT" --week 2026-W49
