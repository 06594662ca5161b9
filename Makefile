# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
# One stamp per interpreter: `make install` reruns pip only when a requirements file or pyproject.toml
# changed, so `make demo` right after `make install` starts at once.
STAMP := .make/install-$(subst /,_,$(PYTHON)).stamp

.PHONY: install demo test lint bench bench-smoke warmup

WARM := .make/warm-$(subst /,_,$(PYTHON)).stamp

install: $(STAMP) $(WARM)

$(STAMP): requirements.txt requirements-airflow.txt requirements-spark.txt pyproject.toml
	$(PYTHON) -m pip install -q -r requirements.txt -r requirements-airflow.txt -r requirements-spark.txt
	$(PYTHON) -m pip install -q --no-deps -e .
	@mkdir -p $(@D) && touch $@

# Compile the numba kernels into dedup_tasks/**/__pycache__ now, not in the first DAG run; again when
# a package source changed (a git pull): a changed kernel file recompiles every kernel once
# (dedup_tasks/kernel_cache.py), otherwise the warm-up only loads them (a few seconds).
$(WARM): $(STAMP) $(wildcard dedup_tasks/*.py dedup_tasks/*/*.py)
	$(PYTHON) -m dedup_tasks.warmup
	@mkdir -p $(@D) && touch $@

warmup:
	$(PYTHON) -m dedup_tasks.warmup

# Three sample crawl hours, built from the shipped public-domain sample corpus
# (bench/sample_corpus), through the crawl_dedup DAG. Needs nothing beside the clone.
demo: install
	PYTHON=$(PYTHON) bash scripts/demo.sh

test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest

bench: install
	$(PYTHON) -m pip install -q -r requirements-bench.txt
	$(PYTHON) -m pip install -q --no-deps text-dedup==0.4.0
	$(PYTHON) -m bench all --size small
