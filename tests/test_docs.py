"""Generated docs and JSON Schemas are committed and must match the code."""

from __future__ import annotations

from pathlib import Path

from ade_core.docs import (
    EXIT_CODES_BEGIN,
    EXIT_CODES_END,
    HOOKS_BEGIN,
    HOOKS_END,
    render_config_reference,
    render_exit_codes,
    render_hook_reference,
    schema_files,
)
from ade_core.exit_codes import TABLE

DOCS = Path(__file__).resolve().parents[1] / "docs"
REGENERATE = "regenerate with: .venv/bin/python -m ade_core.docs docs"


def test_config_reference_is_current():
    assert (DOCS / "config.md").read_text() == render_config_reference(), REGENERATE


def test_hook_reference_is_current():
    text = (DOCS / "plugin-api.md").read_text()
    start, end = text.index(HOOKS_BEGIN), text.index(HOOKS_END) + len(HOOKS_END)
    assert text[start:end] == render_hook_reference(), REGENERATE


def test_json_schemas_are_current():
    committed = {p.name: p.read_text() for p in (DOCS / "schemas").glob("*.json")}
    assert committed == schema_files(), REGENERATE


def test_config_reference_describes_every_section():
    text = render_config_reference()
    for table in (
        "[model]",
        "[data.pool]",
        "[training.sft]",
        "[training.grpo]",
        "[evaluation.in_loop]",
        "[evaluation.held_out]",
        "[operational.agents]",
        "[operational.sandbox]",
    ):
        assert f"### `{table}`" in text, table


def test_exit_code_table_in_cli_docs_is_exit_codes_table():
    text = (DOCS / "cli.md").read_text()
    start, end = text.index(EXIT_CODES_BEGIN), text.index(EXIT_CODES_END) + len(EXIT_CODES_END)
    assert text[start:end] == render_exit_codes(), REGENERATE
    rows = [line.strip("|").split("|") for line in text[start:end].splitlines() if line[:2] == "| "]
    documented = [(int(code), meaning.strip()) for code, meaning in rows[1:]]  # rows[0] is the header
    assert documented == list(TABLE)
