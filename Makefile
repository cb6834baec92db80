# sglog: two commands on a fresh machine
#   make run    create .venv, install sglog, diagnose a bundled story log
#   make test   create .venv if needed, ruff check, ruff format --check, mypy, the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
LOG ?= fixtures/logs/story/eagle3-oom-auto.log

.PHONY: run test venv clean bench reports

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	@$(BIN)/sglog diagnose $(LOG); rc=$$?; [ $$rc -le 1 ] || exit $$rc

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache dist build

-include benchmarks/Makefile.inc
-include reports/Makefile.inc
-include tools/catalog/Makefile.inc
