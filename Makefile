# Every target that runs code creates .venv and installs the project first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
SHARED_TIKTOKEN := $(abspath ../shared/tiktoken)
# Machines without internet use tiktoken's files from ../shared when present.
export TIKTOKEN_CACHE_DIR ?= $(if $(wildcard $(SHARED_TIKTOKEN)/*),$(SHARED_TIKTOKEN),)

.PHONY: install demo test lint docs format bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench,docs]'
	touch $@

demo: install
	$(VENV)/bin/threadline demo

test: install
	$(PY) -m pytest -n 2 -q -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy src

# The docs site from docs/ (mkdocs.yml) into site/; warnings fail the build. Offline: no
# plugin fetches anything.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

format: install
	$(VENV)/bin/ruff check --fix src tests bench
	$(VENV)/bin/ruff format src tests bench

bench: install
	$(PY) bench/context_build.py
	$(PY) bench/append.py
	$(PY) bench/compaction.py
	$(PY) bench/real_transcripts.py
	$(PY) bench/probes.py
	$(PY) bench/backends.py
	$(PY) bench/listing.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
