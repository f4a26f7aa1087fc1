# Two entry points for a fresh machine (see README):
#   make report   set up .venv and write a verification report under reports/
#   make test     set up .venv and run the test suite
VENV ?= .venv
PYTHON ?= python3
PROFILE ?= quick
BIN := $(VENV)/bin

.PHONY: report test bench setup clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# icl-verify exits 0 (no FAIL), 1 (a claim FAILed: a finished run, reported), 2 (usage or input error)
# or 3 (internal error: a crashed check or a bug). Only 1 is turned into success here.
report: setup
	@$(BIN)/icl-verify run --profile $(PROFILE); status=$$?; \
	if [ $$status -eq 1 ]; then echo "make report: the run finished; some claims FAILED (see the report above)"; \
	exit 0; fi; exit $$status

test: setup
	$(BIN)/python -m pytest -n 2

bench: setup
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
