"""IID, Verbalized Sampling and Groot against a real OpenAI-compatible server scripted to plan and solve.

The scripted model reads the problem's id out of the prompt: ``p-ok`` plans well, ``p-short`` lists
fewer approaches than asked, ``p-bad`` answers with prose (a malformed plan), and an approach that
says LEAK makes its execution mention "the given approach". Execution replies box the approach's
answer, so grading checks which approach was executed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ade_core.engine.generation import make_generator
from ade_core.sampling.filters import candidates, select
from ade_core.sampling.samplers import Problem, ProblemSamples, SamplingConfig, SamplingError, sample_chunk
from ade_core.sampling.store import SampleStore, run_chunks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from chat_server import ChatServer  # noqa: E402

PROBLEMS = [
    Problem(pid, f"[{pid}] What is 2 + 2?", "4", [{"role": "user", "content": f"[{pid}] 2 + 2?"}])
    for pid in ("p-ok", "p-short", "p-bad")
]


def scripted(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    pid = re.search(r"\[(p-[a-z]+)\]", prompt).group(1)
    n = int(m.group(1)) if (m := re.search(r"(?:List|choose) (\d+)", prompt)) else 0
    if "HIDDEN APPROACH" in prompt:
        approach = prompt.split("HIDDEN APPROACH:\n", 1)[1]
        answer = re.search(r"answer (\d+)", approach).group(1)
        lead = "Following the given approach, " if "LEAK" in approach else "Counting up, "
        return f"{lead}we get \\boxed{{{answer}}}."
    if pid == "p-bad":
        return "I would just add the numbers."
    count = n - 1 if pid == "p-short" else n
    answers = ["4", "5", "4 LEAK", "4"]
    if "decision tree" in prompt:
        tree = (
            "<tree>\nA. Count\nA1a. On fingers\nA1b. On a number line\nB. Recall the fact\nC. Add in binary\n</tree>\n"
        )
        leaves = ["A -> A1a", "A1b", "B", "C"]
        return tree + "".join(
            f"Path: {leaves[i]}\n<approach>Plan {i}: answer {answers[i]}.</approach>\n" for i in range(count)
        )
    return "".join(f"<approach>Probability: 0.{i + 1}\nPlan {i}: answer {answers[i]}.</approach>" for i in range(count))


@pytest.fixture(scope="module")
def server():
    with ChatServer(reply=scripted) as running:
        yield running


@pytest.fixture
def generator(server):
    gen = make_generator("openai", "scripted", base_url=server.url, retries=0)
    yield gen
    gen.close()


def boxed(pairs):
    return [f"\\boxed{{{reference}}}" in response for response, reference in pairs]


@pytest.mark.parametrize("sampler", ["verbalized", "groot"])
def test_strategic_samplers_plan_execute_drop_leaks_and_type_bad_plans(sampler, generator, server):
    config = SamplingConfig(sampler=sampler, budget=4, plan_max_new_tokens=300)
    before = len(server.state.received)
    ok, short, bad = sample_chunk(PROBLEMS, generator, config, 0, grade=boxed)
    calls = server.state.received[before:]
    # one planning call per problem, one execution per usable approach: 3 + (4 + 3)
    assert len(calls) == 3 + 7 and all(call.body["n"] == 1 for call in calls)
    assert ok.plan["status"] == "ok" and ok.plan["tokens"] > 0 and ok.plan["approaches"] == 4
    assert [s["correct"] for s in ok.samples] == [True, False, None, True]  # the third leaked: never graded
    assert ok.leaked == 1 and ok.samples[2]["leak"] == "the given approach" and len(ok.kept()) == 3
    assert all("HIDDEN" not in s["response"] for s in ok.samples)
    assert short.plan["status"] == "shortfall" and len(short.samples) == 3  # its usable approaches still run
    assert bad.plan["status"] == "malformed" and bad.plan["raw"] == "I would just add the numbers."
    assert bad.samples == []
    if sampler == "verbalized":
        assert [s["probability"] for s in ok.samples] == [0.1, 0.2, 0.3, 0.4]
    else:
        assert [s["path"] for s in ok.samples] == [["A", "A1a"], ["A", "A1b"], ["B"], ["C"]]


def test_iid_draws_the_budget_from_the_plain_prompt(generator, server):
    before = len(server.state.received)
    results = sample_chunk(PROBLEMS[:1], generator, SamplingConfig(sampler="iid", budget=3, temperature=1.5), 0)
    (call,) = server.state.received[before:]
    assert call.body["n"] == 3 and call.body["temperature"] == 1.5
    assert call.body["messages"] == PROBLEMS[0].messages  # the original conversation, no planning
    assert [s["approach"] for s in results[0].samples] == [None] * 3 and results[0].plan is None


def test_bad_settings_are_refused_by_name():
    for bad, says in [
        ({"sampler": "beam"}, "unknown sampler 'beam'"),
        ({"budget": 0}, "budget = 0 must be >= 1"),
        ({"temperature": -1}, "temperature = -1"),
        ({"top_p": 0}, "top_p = 0"),
    ]:
        with pytest.raises(SamplingError, match=re.escape(says)):
            SamplingConfig(**{"sampler": "iid", "budget": 2, **bad})


def test_sampling_resumes_where_it_stopped_and_refuses_other_settings(generator, tmp_path):
    config = SamplingConfig(sampler="verbalized", budget=4, chunk=1)
    ids = [p.problem_id for p in PROBLEMS]
    store = SampleStore(tmp_path / "out")
    calls = []

    def draw(index, members, fail_at=None):
        calls.append(index)
        if index == fail_at:
            raise KeyboardInterrupt
        return sample_chunk([PROBLEMS[i] for i in members], generator, config, index, grade=boxed)

    done = store.open(config.to_json())
    with pytest.raises(KeyboardInterrupt):
        run_chunks(ids, config.chunk, done, lambda i, m: draw(i, m, fail_at=1), store)
    with store.records_path.open("a") as handle:
        handle.write('{"problem_id": "p-short", "sam')  # torn by the crash
    seen = []
    done = store.open(config.to_json())
    assert done == {"p-ok"}
    assert run_chunks(ids, config.chunk, done, draw, store, progress=lambda d, t: seen.append((d, t))) == 2
    assert calls == [0, 1, 1, 2] and seen == [(1, 3), (2, 3), (3, 3)]
    assert [r.problem_id for r in store.records()] == ids
    fresh = SampleStore(tmp_path / "fresh")
    run_chunks(ids, 1, fresh.open(config.to_json()), draw, fresh)
    assert [r.to_json() for r in store.records()] == [r.to_json() for r in fresh.records()]  # same draws
    with pytest.raises(SamplingError, match=r"budget: 4 -> 8"):
        store.open(SamplingConfig(sampler="verbalized", budget=8, chunk=1).to_json())


def record(pid: str, grades: list[bool | None], leaks: int = 0) -> ProblemSamples:
    samples = [
        {"index": i, "response": f"r{i}", "tokens": 3, "leak": None, "correct": g, "approach": None}
        for i, g in enumerate(grades)
    ]
    samples += [{"index": 99, "response": "x", "tokens": 1, "leak": "the hint", "correct": None}] * leaks
    return ProblemSamples(pid, "verbalized", None, samples)


def test_filters_keep_correct_random_or_incorrect_with_sizes_matched_to_rft():
    records = [record("a", [True, False, True], leaks=1), record("b", [False, False, True])]
    rft = select(records, "rft")
    assert [(r.problem_id, s["index"]) for r, s in rft] == [("a", 0), ("a", 2), ("b", 2)]
    sft = select(records, "sft", seed=3)
    assert len(sft) == len(rft) and all(s["leak"] is None for _, s in sft)
    assert select(records, "sft", seed=3) == sft and len(select(records, "sft", size=5)) == 5
    anti = select(records, "anti")
    assert all(not s["correct"] for _, s in anti) and len(anti) == 3
    assert len(select(records, "anti", match_rft=True)) == 3 and len(select(records, "anti", size=1)) == 1
    continuous = [dict(s, score=v) for s, v in zip(record("c", [False] * 3).samples, [0.5, 0.1, 0.3], strict=True)]
    scored = [ProblemSamples("c", "iid", None, continuous)]
    assert [s["score"] for _, s in select(scored, "anti", size=2)] == [0.1, 0.3]  # the worst two
    with pytest.raises(SamplingError, match="not graded"):
        select([record("d", [None])], "rft")
    rows = candidates(rft, {"a": [{"role": "user", "content": "qa"}], "b": [{"role": "user", "content": "qb"}]})
    assert [len(row["trajectories"]) for row in rows] == [2, 1]
    assert rows[0]["trajectories"][0]["messages"] == [
        {"role": "user", "content": "qa"},
        {"role": "assistant", "content": "r0"},
    ]
    assert "approach" not in json.dumps(rows)


def test_pass_at_k_matches_the_combinatorial_definition_and_refuses_k_above_n():
    from itertools import combinations
    from math import comb

    from ade_core.sampling.evaluate import frontier_ids, parse_ks, pass_at_ks

    grades = {"a": [True, False, False, True, False], "b": [False] * 5, "c": [True] * 5}
    records = [record(pid, g) for pid, g in grades.items()]
    got = pass_at_ks(records, [1, 2, 5])
    for k in (1, 2, 5):
        # every k-subset of a problem's samples, counted directly
        expected = sum(
            sum(any(subset) for subset in combinations(g, k)) / comb(len(g), k) for g in grades.values()
        ) / len(grades)
        assert got[f"pass@{k}"] == pytest.approx(100 * expected)
    leaky = [record("d", [True, False], leaks=3)]  # dropped responses are not samples: n = 2
    with pytest.raises(SamplingError, match=r"pass@3 needs at least 3 samples per problem, but 2 are drawn"):
        pass_at_ks(leaky, [1, 3])
    assert parse_ks("8, 1,8") == (1, 8)
    for bad in ("0,1", "one", ""):
        with pytest.raises(SamplingError, match="--passk"):
            parse_ks(bad)
    assert frontier_ids(records, 2) == ["a", "b"] and frontier_ids(records, 0) == ["b"]


def test_rsa_keeps_its_population_and_aggregates_distinct_parents(server):
    import itertools

    from ade_core.sampling.rsa import RSAConfig, aggregation_prompt, run_rsa

    counter = itertools.count()

    def model(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if "CANDIDATE 1" in prompt:  # an aggregation: right when any parent was
            return "So \\boxed{4}." if "\\boxed{4}" in prompt else "So \\boxed{5}."
        return "\\boxed{4}" if next(counter) % 4 == 0 else "\\boxed{5}"  # a quarter of the first draws

    server.state.reply = model
    try:
        gen = make_generator("openai", "scripted", base_url=server.url, retries=0)
        config = RSAConfig(population=4, subset=2, iterations=2, runs=2, max_new_tokens=16)
        result = run_rsa(PROBLEMS[:2], gen, config, boxed)
        gen.close()
    finally:
        server.state.reply = scripted
    assert len(result["runs"]) == 2
    for run in result["runs"]:
        by_round = run["pass@1_by_round"]
        assert len(by_round) == 3 and by_round[0] == 25.0 and by_round[0] <= by_round[1] <= by_round[2]
        for members in run["populations"]:
            assert len(members) == 4
            assert all(len(set(m["parents"])) == 2 and all(0 <= i < 4 for i in m["parents"]) for m in members)
    assert result["pass@1"] == sum(run["pass@1"] for run in result["runs"]) / 2
    assert "CANDIDATE 1:\nx" in aggregation_prompt(PROBLEMS[0], ["x", "y"])
    assert "a candidate solution" in aggregation_prompt(PROBLEMS[0], ["x"])  # a subset of one refines
    with pytest.raises(SamplingError, match="subset = 5 exceeds the population"):
        RSAConfig(population=4, subset=5)
