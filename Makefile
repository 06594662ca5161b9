# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3

.PHONY: install demo test lint bench bench-smoke

install:
	$(PYTHON) -m pip install -q -r requirements.txt -r requirements-airflow.txt -r requirements-spark.txt
	$(PYTHON) -m pip install -q --no-deps -e .

# Three sample crawl hours (built from ../shared/data/corpora) through the crawl_dedup DAG.
demo: install
	PYTHON=$(PYTHON) bash scripts/demo.sh

test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest

bench: install
	$(PYTHON) -m pip install -q -r requirements-bench.txt
	$(PYTHON) -m pip install -q --no-deps text-dedup==0.4.0
	$(PYTHON) -m bench all --size small
