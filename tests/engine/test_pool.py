"""The candidate pool from local OpenThoughts-format files (JSONL and parquet) and the tiny world."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ade_core.config import load_config
from ade_core.engine.pool import annotate_lengths, candidate_rows, length_bin
from ade_core.tiny.tokenizer import build_tokenizer

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "openthoughts_fixture.jsonl"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _config(source: str, size: int):
    overrides = [f"data.source={source}", f"data.pool.size={size}", "data.select_size=3"]
    overrides.append("data.pool.groups={math=1,code=1,science=1}")
    return load_config(EXAMPLES / "tiny-data-selection.toml", overrides).experiment


def test_openthoughts_rows_become_flat_candidates_drawn_by_the_pool_builder(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "ot.jsonl")
    rows = candidate_rows(_config("ot.jsonl", 6), tmp_path)
    assert sorted(r["domain"] for r in rows) == ["code", "code", "math", "math", "science", "science"]
    assert rows == candidate_rows(_config("ot.jsonl", 6), tmp_path)  # seeded
    for row in rows:
        assert row["trajectory_ids"] == [row["candidate_id"]] and row["quality_score"] == 1.0
        assert row["difficulty"] == "unlabeled" or row["domain"] == "math"
        user, assistant = row["messages"]
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert assistant["content"].startswith("<think>\n") and assistant["content"].count("</think>") == 1
        assert "begin_of_solution" not in assistant["content"]


def test_a_group_of_several_trajectories_becomes_one_candidate_each():
    from ade_core.engine.pool import as_rows

    turn = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>t</think>a"}]
    group = {"candidate_id": "g", "domain": "math", "problem_id": "p", "level": 3}
    single = as_rows({**group, "trajectories": [{"trajectory_id": "g-t0", "messages": turn}]}, 0, "here")
    assert [(r["candidate_id"], r["trajectory_ids"], r["difficulty"]) for r in single] == [("g", ["g"], 3)]
    pair = [{"trajectory_id": f"g-t{k}", "messages": turn} for k in range(2)]
    rows = as_rows({**group, "trajectories": pair, "quality_score": 0.5}, 0, "here")
    assert [(r["candidate_id"], r["trajectory_ids"], r["problem_id"]) for r in rows] == [
        ("g-t0", ["g-t0"], "p"),
        ("g-t1", ["g-t1"], "p"),
    ]
    assert {r["quality_score"] for r in rows} == {0.5}


def test_parquet_reads_the_same_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ot.parquet")
    shutil.copy(FIXTURE, tmp_path / "ot.jsonl")
    assert candidate_rows(_config("ot.parquet", 9), tmp_path) == candidate_rows(_config("ot.jsonl", 9), tmp_path)


def test_lengths_are_chat_template_tokens_with_bins_scaled_to_the_cap(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "ot.jsonl")
    tokenizer = build_tokenizer()
    rows = annotate_lengths(candidate_rows(_config("ot.jsonl", 9), tmp_path), tokenizer, cap=120)
    for row in rows:
        rendered = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        assert row["uncapped_token_count"] == len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
        assert row["token_count"] == min(row["uncapped_token_count"], 120)
        assert row["length_bin"] == length_bin(row["token_count"], 120)
        assert row["over_cap"] is (row["uncapped_token_count"] > 120)
    assert [length_bin(n, 16384) for n in (4096, 4097, 8192, 8193, 16384)] == [
        "le_4096",
        "4097_8192",
        "4097_8192",
        "8193_16384",
        "8193_16384",
    ]  # the paper's bins at its cap
    # the same names at any cap, edges at cap/4, cap/2 and cap; over the cap is the flag, never a bin
    assert [length_bin(n, 120) for n in (30, 31, 60, 61, 120)] == [
        "le_4096",
        "4097_8192",
        "4097_8192",
        "8193_16384",
        "8193_16384",
    ]
