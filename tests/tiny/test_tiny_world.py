"""The tiny world's builders: problems, splits, pool builder, candidates with defects, tokenizer."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ade_core.tiny.candidates import DEFAULT_RATES, DEFECTS, build_candidates
from ade_core.tiny.problems import (
    LEVELS,
    SUBJECTS,
    add,
    generate_problems,
    load_math_rows,
    multiply,
    problem_key,
    subtract,
)
from ade_core.tiny.splits import build_pool, largest_remainder, stratified_sample
from ade_core.tiny.tokenizer import BOXED, build_tokenizer
from ade_core.tiny.world import HELD_OUT, PRESETS, TRAINING_SPLITS, WorldSpec, build_splits, write_world


def test_generator_is_deterministic_and_covers_subjects_and_levels():
    first, second = generate_problems(700, seed=3), generate_problems(700, seed=3)
    assert first == second and generate_problems(50, seed=4) != first[:50]
    assert {p.subject for p in first} == set(SUBJECTS) and {p.level for p in first} == set(LEVELS)
    for p in first:
        assert p.answer.lstrip("-").isdigit() and p.solution and p.unique_id.startswith("tiny/")
    assert len({problem_key(p.problem) for p in first}) == 700


def test_solutions_end_in_the_answer():
    for p in generate_problems(300, seed=1):
        assert p.solution.split("=")[-1] == p.answer, p


def test_worked_steps_are_correct_single_digit_facts_on_the_in_loop_levels():
    import re

    for p in generate_problems(2000, seed=2):
        for step in p.solution.split("; "):
            for column in re.findall(r"\[([^\]]*)\]", step):  # column work: every entry is exact arithmetic
                for entry in column.split(", "):
                    expression, value = entry.split("=")
                    assert eval(expression) == int(value), (p, entry)  # digits and + - * only
            header = re.sub(r"=\[[^\]]*\]", "", step)
            assert "[" not in header and "]" not in header, p
        if p.level <= 3:
            # on the in-loop levels a product never multiplies two numbers of two or more digits
            assert not re.search(r"\d\d\*\d\d", p.solution), p
    assert add(47, 85) == ("47+85=[7+5=12, 4+8+1=13]=132", 132)
    assert subtract(85, 47) == ("85-47=[15-7=8, 8-1-4=3]=38", 38)
    assert multiply(6, 47) == ("6*47=[6*7=42, 6*4+4=28]=282", 282)


def test_real_math_rows_load(tmp_path):
    path = tmp_path / "math.jsonl"
    rows = [
        {"problem": "Compute $1+1$.", "solution": "It is $\\boxed{2}$.", "type": "Prealgebra", "level": "Level 2"},
        {
            "problem": "Find $x$.",
            "solution": "...",
            "answer": "\\frac{1}{2}",
            "subject": "Algebra",
            "level": 5,
            "unique_id": "test/algebra/1.json",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = load_math_rows(path)
    assert (first.answer, first.subject, first.level) == ("2", "Prealgebra", 2)
    assert (second.answer, second.unique_id) == ("\\frac{1}{2}", "test/algebra/1.json")


def test_largest_remainder():
    assert largest_remainder({"math": 1, "code": 1, "science": 1}, 3840) == {
        "math": 1280,
        "code": 1280,
        "science": 1280,
    }
    assert largest_remainder({"a": 0.5, "b": 0.3, "c": 0.2}, 7) == {"a": 4, "b": 2, "c": 1}
    counts = largest_remainder({k: 1 for k in "abcdefg"}, 10)
    assert sum(counts.values()) == 10 and max(counts.values()) - min(counts.values()) == 1
    with pytest.raises(ValueError):
        largest_remainder({"a": -1}, 3)


def test_stratified_sample_follows_quotas():
    bank = generate_problems(3000, seed=0, levels=(1, 2, 3))
    target = Counter((p.subject, p.level) for p in bank[:500])
    chosen = stratified_sample(bank, lambda p: (p.subject, p.level), target, 300, seed=1)
    realized = Counter((p.subject, p.level) for p in chosen)
    expected = largest_remainder(dict(target), 300)
    assert realized == Counter({k: v for k, v in expected.items() if v}) and len(set(chosen)) == 300
    assert chosen == stratified_sample(bank, lambda p: (p.subject, p.level), target, 300, seed=1)


def test_pool_builder_records_availability_and_realized_counts():
    rows = [
        {"id": i, "group": g} for i in range(600) for g in ("math", "code", "science") if i % 3 == "mcs".index(g[0])
    ]
    rows += [{"id": 1000 + i, "group": "math"} for i in range(100)]
    pool, report = build_pool(rows, lambda r: r["group"], {"math": 1, "code": 1, "science": 1}, 300, seed=7)
    assert report.allocated == report.realized == {"math": 100, "code": 100, "science": 100}
    assert report.available == {"math": 300, "code": 200, "science": 200}
    again, _ = build_pool(rows, lambda r: r["group"], {"math": 1, "code": 1, "science": 1}, 300, seed=7)
    assert again == pool and len({r["id"] for r in pool}) == 300
    with pytest.raises(ValueError, match="fewer rows than allocated"):
        build_pool(rows, lambda r: r["group"], {"math": 1, "code": 9}, 300, seed=7)


def test_candidates_are_complete_trajectories_with_labelled_defects():
    problems = generate_problems(2000, seed=5)
    candidates = build_candidates(problems, chat_count=200, seed=5)
    counts = Counter(c.defect or "clean" for c in candidates[:2000])
    for defect, rate in DEFAULT_RATES.items():
        assert abs(counts[defect] / 2000 - rate) < 0.03, (defect, counts[defect])
    for c in candidates:
        user, assistant = c.messages
        assert user["role"] == "user" and assistant["role"] == "assistant"
        text = assistant["content"]
        assert text.count("<think>") == 1
        if c.defect != "truncated":
            assert text.count("</think>") == 1 and text.split("</think>")[1].strip()
    by_defect = {c.defect: c for c in candidates}
    assert "\\boxed{" not in by_defect["missing_box"].messages[1]["content"]
    assert "</think>" not in by_defect["truncated"].messages[1]["content"]
    assert set(DEFECTS) >= {d for d in by_defect if d}


def test_splits_are_disjoint_and_shifted():
    splits = build_splits(
        WorldSpec(in_loop=140, held_out=40, rft_pool=200, rft_pool_hard=200, sft_math=300, sft_chat=10)
    )
    keys = {name: {problem_key(p.problem) for p in ps} for name, ps in splits.items()}
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if "rft_pool_math" in (a, b) and {a, b} <= {*TRAINING_SPLITS}:
                continue  # the curriculum pool may share problems with the other training pools ...
            assert not keys[a] & keys[b], (a, b)  # ... never with an evaluation split
    assert len(splits["rft_pool_math"]) == 3072 and len(keys["rft_pool_math"]) == 3072
    assert {p.level for p in splits["held_out_harder"]} == {4, 5}
    hard, mixed = (Counter(p.level >= 4 for p in splits[name])[True] for name in ("rft_pool_hard", "rft_pool"))
    assert hard > 2 * mixed  # the hard pool is weighted to levels 4-5 (1:1:2:3:3 against 3:3:2:1:1)
    assert all("dot product of" not in p.problem or "Take" in p.problem for p in splits["held_out_reworded"])
    assert {p.subject for p in splits["held_out_subjects"]} == {"Counting & Probability", "Geometry"}
    assert Counter((p.subject, p.level) for p in splits["in_loop"]).most_common()[-1][1] >= 6


def test_the_pretraining_corpus_holds_no_evaluation_problem_of_any_preset():
    from dataclasses import replace

    from ade_core.tiny.world import evaluation_keys, pretraining_corpus

    excluded = evaluation_keys()
    assert len(excluded) > 300 + 4 * 150
    corpus = pretraining_corpus(replace(PRESETS["tiny"], pretrain_conversations=3000), excluded)
    questions = {problem_key(m["content"]) for c in corpus for m in c if m["role"] == "user"}
    assert len(questions) > 2000 and not questions & excluded


def test_world_files_keep_ground_truth_apart(tmp_path):
    info = write_world(
        WorldSpec(
            in_loop=140, held_out=40, rft_pool=200, rft_pool_hard=200, rft_pool_mid=200, sft_math=300, sft_chat=50
        ),
        tmp_path,
    )
    data = tmp_path / "data"
    assert {p.stem for p in data.glob("*.jsonl")} == {
        "in_loop",
        "rft_pool",
        "rft_pool_hard",
        "rft_pool_mid",
        "rft_pool_math",
        "candidates",
        *HELD_OUT,
    }
    inventory = data.joinpath("candidates.jsonl").read_text()
    assert "defect" not in inventory and len(inventory.splitlines()) == 350
    labels = [json.loads(line) for line in (tmp_path / "ground_truth" / "defects.jsonl").read_text().splitlines()]
    assert len(labels) == 350 and info["candidates"] == 350


def test_tokenizer_markers_are_single_tokens():
    tokenizer = build_tokenizer()
    for marker in ("<think>", "</think>", BOXED, "<|im_start|>", "<|im_end|>"):
        assert len(tokenizer(marker, add_special_tokens=False)["input_ids"]) == 1, marker
    text = tokenizer.apply_chat_template(
        [
            {"role": "user", "content": "What is 2 + 3?"},
            {"role": "assistant", "content": "<think>2+3=5</think>\\boxed{5}"},
        ],
        tokenize=False,
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_presets_state_their_shapes():
    assert (
        PRESETS["tiny-full"].rft_pool == 3072 and PRESETS["tiny-full"].sft_math + PRESETS["tiny-full"].sft_chat == 3840
    )
    assert Path(__file__).exists()


def test_the_curriculum_pool_follows_maths_shares_and_carries_three_long_prompts():
    from ade_core.tiny.math_pool import MATH_TRAIN_LEVELS, MATH_TRAIN_SUBJECTS, PREAMBLE, math_quotas

    quotas = math_quotas(3072)
    assert sum(quotas.values()) == 3072
    for subject, count in MATH_TRAIN_SUBJECTS.items():  # each subject's share of MATH's training split
        assert abs(sum(n for (s, _), n in quotas.items() if s == subject) - 3072 * count / 7500) < 4
    assert quotas[("Algebra", 5)] > quotas[("Algebra", 1)] * (MATH_TRAIN_LEVELS[5] / MATH_TRAIN_LEVELS[1]) - 2
    pool = build_splits(PRESETS["tiny"])["rft_pool_math"]
    long = [p for p in pool if p.problem.startswith(PREAMBLE)]
    assert len(long) == 3 and {p.subject for p in long} <= {"Algebra", "Prealgebra", "Number Theory"}
    by_subject = Counter(p.subject for p in pool)
    assert all(abs(by_subject[s] - 3072 * n / 7500) < 4 for s, n in MATH_TRAIN_SUBJECTS.items())
    assert "rft_pool_math" not in build_splits(PRESETS["tiny-full"])  # its in-loop set leaves too few
