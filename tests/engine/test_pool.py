"""The candidate pool from local OpenThoughts-format files (JSONL and parquet) and the tiny world."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ade_core.config import load_config
from ade_core.engine.pool import annotate_lengths, candidate_groups, length_bin
from ade_core.tiny.tokenizer import build_tokenizer

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "openthoughts_fixture.jsonl"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _config(source: str, size: int):
    overrides = [f"data.source={source}", f"data.pool.size={size}", "data.select_size=3"]
    overrides.append("data.pool.groups={math=1,code=1,science=1}")
    return load_config(EXAMPLES / "tiny-data-selection.toml", overrides).experiment


def test_openthoughts_rows_become_groups_drawn_by_the_pool_builder(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "ot.jsonl")
    groups = candidate_groups(_config("ot.jsonl", 6), tmp_path)
    assert sorted(g["domain"] for g in groups) == ["code", "code", "math", "math", "science", "science"]
    assert groups == candidate_groups(_config("ot.jsonl", 6), tmp_path)  # seeded
    for group in groups:
        (trajectory,) = group["trajectories"]
        user, assistant = trajectory["messages"]
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert assistant["content"].startswith("<think>\n") and assistant["content"].count("</think>") == 1
        assert "begin_of_solution" not in assistant["content"] and trajectory["trajectory_id"].endswith("-t0")


def test_parquet_reads_the_same_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ot.parquet")
    shutil.copy(FIXTURE, tmp_path / "ot.jsonl")
    assert candidate_groups(_config("ot.parquet", 9), tmp_path) == candidate_groups(_config("ot.jsonl", 9), tmp_path)


def test_lengths_are_chat_template_tokens_with_bins_scaled_to_the_cap(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "ot.jsonl")
    tokenizer = build_tokenizer()
    groups = annotate_lengths(candidate_groups(_config("ot.jsonl", 9), tmp_path), tokenizer, cap=120)
    for trajectory in (t for g in groups for t in g["trajectories"]):
        rendered = tokenizer.apply_chat_template(trajectory["messages"], tokenize=False)
        assert trajectory["token_count"] == len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
        assert trajectory["length_bin"] == length_bin(trajectory["token_count"], 120)
        assert trajectory["over_cap"] == (trajectory["token_count"] > 120)
    assert [length_bin(n, 16384) for n in (4096, 4097, 8192, 8193, 16384, 16385)] == [
        "short",
        "medium",
        "medium",
        "long",
        "long",
        "over_cap",
    ]  # the paper's bins at its cap
