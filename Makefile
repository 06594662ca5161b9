# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
DEMO_ROOT ?= ./data
DEMO_HOURS ?= 2026-12-01T00 2026-12-01T01 2026-12-01T02

.PHONY: install demo test lint bench bench-smoke

install:
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps -e .

# Build three sample crawl hours from the shared news corpora and deduplicate them in order.
demo: install
	$(PYTHON) -m bench.generate --docs 5000 --hours 3 --seed 0 --out $(DEMO_ROOT)
	@for hour in $(DEMO_HOURS); do $(PYTHON) -m dedup_tasks run --root $(DEMO_ROOT) --batch $$hour --no-progress || exit 1; done

test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest

bench: install
	$(PYTHON) -m pip install -q -r requirements-bench.txt
	$(PYTHON) -m pip install -q --no-deps text-dedup==0.4.0
	$(PYTHON) -m bench all --size small
