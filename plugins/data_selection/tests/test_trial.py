"""`ade trial` on the tiny world: complete Trials of hand-written and catalog strategies."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ade_core.cli import main
from ade_core.engine.package import open_package
from ade_core.plugins import load_plugins
from ade_core.testing import run_command

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIG = str(EXAMPLES / "tiny-data-selection.toml")
ADE = str(Path(sys.executable).with_name("ade"))
# Small enough for CI: 40 examples, one epoch, 30 in-loop problems.
QUICK = (
    "data.select_size=40",
    "training.sft.epochs=1",
    "training.sft.per_device_batch_size=8",
    "checkpoint.every_steps=5",
    "evaluation.in_loop.limit=30",
    "evaluation.in_loop.k_online=1",
    "evaluation.in_loop.k_offline=2",
)

# Written from the paper's Data Selection contract alone (flat rows, a JSON-string rubric with criteria, as in
# docs/data-selection.md): a judge-gated selector that prefers short, uncapped targets, as a paper strategy does.
OUTSIDER = """
import json

# The paper's selectors pass the rubric as a JSON string with `criteria`.
RUBRIC = json.dumps({"criteria": [
    {"name": "correctness", "description": "the boxed final answer solves the question", "levels": [0, 1],
     "weight": 0.7},
    {"name": "format", "description": "one closed think span, then a final answer", "levels": [0, 1], "weight": 0.3},
]})


async def select_trajectories(candidate_inventory, select_size, judge):
    requests = []
    for record in candidate_inventory:
        user = [m["content"] for m in record["messages"] if m["role"] == "user"][0]
        target = [m["content"] for m in record["messages"] if m["role"] == "assistant"][-1]
        requests.append({"question": user, "response": target, "rubric": RUBRIC})
    answers = await judge(requests)
    def score(pair):
        record, answer = pair
        known = answer.get("status") == "completed"
        return (-(answer["projected_score"] if known else 0.5), record["token_count"], record["candidate_id"])
    chosen = []
    for record, _ in sorted(zip(candidate_inventory, answers), key=score):
        if len(chosen) + len(record["trajectory_ids"]) <= select_size:
            chosen.extend(record["trajectory_ids"])
    return json.loads(json.dumps(chosen))
"""


def _args(*extra: str) -> list[str]:
    return [arg for item in (*QUICK, *extra) for arg in ("--set", item)]


@pytest.mark.trial
def test_a_strategy_from_outside_the_project_runs_a_full_trial(tmp_path):
    strategy = tmp_path / "outsider.py"
    strategy.write_text(OUTSIDER)
    proc = run_command(
        [ADE, "trial", CONFIG, str(strategy), "--json", "--out", str(tmp_path / "trial"), *_args("judge.enabled=true")],
        idle_s=30,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    mine, reference = result["trial"], result["reference"]
    assert mine["status"] == "completed" and mine["realization"]["verdict"] == "verified"
    assert set(mine["in_loop_scores"]) >= {"pass_at_k", "average_at_k"} and reference["in_loop_scores"]
    assert mine["statistics"]["selected"] == 40 and mine["statistics"]["pool_trajectories"] == 2000
    package = open_package(Path(mine["package"]))
    (executed,) = package.records("executed_strategy")
    assert executed["source"] == OUTSIDER
    (call,) = executed["realization"]["calls"]
    (judge_call,) = call["service_calls"]  # the realization record holds every judge call and its answers
    assert judge_call["name"] == "judge" and len(judge_call["value"]) == len(judge_call["args"]) == 2000
    # math answers are judged; a chat answer's correctness cannot be re-derived: unavailable, never a score
    by_status = {answer["status"] for answer in judge_call["value"]}
    assert by_status == {"completed", "unavailable"}
    assert all("re-derive" in a["reason"] for a in judge_call["value"] if a["status"] == "unavailable")
    selected = package.records("selected_examples")
    assert len(selected) == 40 and all(row["domain"] in ("math", "chat") for row in selected)
    # the world's ground truth never reaches the strategy's inputs
    assert "defect" not in json.dumps(call["statistics"]) and "ground_truth" not in json.dumps(executed)


@pytest.mark.trial
def test_the_reference_trial_is_cached_per_config_digest(tmp_path, monkeypatch):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path / "cache"))  # a cold cache, whatever ran before
    runner = CliRunner()
    strategy = tmp_path / "first.py"
    strategy.write_text(load_plugins().task("data_selection").reference_strategy().source)
    first = runner.invoke(main, ["trial", CONFIG, str(strategy), "--json", "--out", str(tmp_path / "a"), *_args()])
    assert first.exit_code == 0, first.output
    # the second Trial's table on stdout, its summary in --out (the same JSON as --json prints)
    again = runner.invoke(main, ["trial", CONFIG, str(strategy), "--out", str(tmp_path / "b"), *_args()])
    assert again.exit_code == 0, again.output
    summaries = (json.loads(first.stdout), json.loads((tmp_path / "b" / "summary.json").read_text()))
    ref_a, ref_b = (summary["reference"] for summary in summaries)
    assert ref_a["package"] == ref_b["package"]  # run once, reused
    base_a, base_b = (summary["base"] for summary in summaries)
    assert base_a == base_b and base_a["in_loop_scores"]  # Base too
    announced = "first Trial under this config"
    assert announced in first.stderr and announced not in again.stderr
    # the reference strategy scores exactly as the cached reference Trial: same draw, same seeds
    mine = summaries[0]["trial"]
    assert mine["in_loop_scores"] == ref_a["in_loop_scores"]
    # and the realization says so: this Trial only re-measures the reference, and the table notes it
    assert mine["realization"]["duplicate_of_reference"] is True
    assert "note: duplicate_of_reference" in again.stdout


def test_a_reference_whose_evaluation_is_missing_is_never_reused(tmp_path):
    from ade_core.harness.admission import strategy_digest
    from ade_core.harness.standalone import cached_reference

    source = load_plugins().task("data_selection").reference_strategy().source
    (tmp_path / "package").mkdir()
    summary = {"strategy_digest": strategy_digest(source), "package": str(tmp_path / "package")}
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "in_loop_scores": None}))
    assert cached_reference(tmp_path, source) is None
    scored = {**summary, "in_loop_scores": {"pass_at_k": 60.0, "average_at_k": 40.0}}
    (tmp_path / "summary.json").write_text(json.dumps(scored))
    assert cached_reference(tmp_path, source) == scored
    assert cached_reference(tmp_path, source + "\n# edited") is None


@pytest.mark.trial
@pytest.mark.parametrize("family", [f.name for f in load_plugins().task("data_selection").strategy_catalog()])
def test_every_catalog_strategy_is_admitted_and_trained(tmp_path, family):
    runner = CliRunner()
    rendered = runner.invoke(main, ["catalog", "data_selection", family])
    assert rendered.exit_code == 0, rendered.output
    strategy = tmp_path / f"{family}.py"
    strategy.write_text(rendered.stdout)
    result = runner.invoke(main, ["trial", CONFIG, str(strategy), "--json", "--out", str(tmp_path / "t"), *_args()])
    assert result.exit_code == 0, result.output[-3000:]
    trial = json.loads(result.stdout)["trial"]
    assert trial["status"] == "completed" and trial["statistics"]["selected"] == 40, trial


def test_an_inadmissible_strategy_exits_1_with_its_typed_checks(tmp_path):
    strategy = tmp_path / "bad.py"
    strategy.write_text(
        "import os\nasync def select_trajectories(candidate_inventory, select_size, judge):\n    return []\n"
    )
    result = CliRunner().invoke(main, ["trial", CONFIG, str(strategy), *_args()])
    assert result.exit_code == 1
    assert "INADMISSIBLE" in result.output and "failed  static_check" in result.output


def test_admit_prints_realized_statistics_and_checks_declared_claims(tmp_path):
    strategy = tmp_path / "chat_first.py"
    strategy.write_text(
        "async def select_trajectories(candidate_inventory, select_size, judge):\n"
        "    rows = sorted(candidate_inventory, key=lambda r: (r['domain'] != 'chat', r['candidate_id']))\n"
        "    return [r['trajectory_ids'][0] for r in rows[:select_size]]\n"
    )
    runner = CliRunner()
    honest = runner.invoke(main, ["admit", CONFIG, str(strategy), "--claim", "domain_chat >= 40", *_args()])
    assert honest.exit_code == 0, honest.output
    assert "admitted" in honest.output and ": verified" in honest.output and "domain_chat" in honest.output
    claims_math = runner.invoke(main, ["admit", CONFIG, str(strategy), "--claim", "domain_chat == 0", *_args()])
    assert claims_math.exit_code == 0 and ": deviated" in claims_math.output
    assert "declared domain_chat == 0, realized 40" in claims_math.output
    bad = runner.invoke(main, ["admit", CONFIG, str(strategy), "--claim", "domain_chat is zero"])
    assert bad.exit_code == 2 and "STATISTIC OP NUMBER" in bad.output


@pytest.mark.trial
def test_the_code_objective_runs_through_the_sandboxed_code_grader(tmp_path):
    strategy = tmp_path / "reference.py"
    strategy.write_text(load_plugins().task("data_selection").reference_strategy().source)
    config = str(EXAMPLES / "tiny-data-selection-code.toml")
    result = CliRunner().invoke(
        main, ["trial", config, str(strategy), "--json", "--out", str(tmp_path / "t"), *_args()]
    )
    assert result.exit_code == 0, result.output[-3000:]
    trial = json.loads(result.stdout)["trial"]
    responses = open_package(Path(trial["package"])).records("eval_responses")
    assert {r["problem_id"] for r in responses} == {"lcb-fixture-1", "lcb-fixture-2", "lcb-fixture-3"}
    assert trial["status"] == "completed" and 0 <= trial["in_loop_scores"]["pass_at_k"] <= 100


def test_the_inventory_holds_only_documented_fields_and_no_world_labels():
    from ade_core.config import load_config

    config = load_config(CONFIG).experiment
    (call,) = load_plugins().task("data_selection").task_inputs(config, str(EXAMPLES)).calls
    inventory = call.arguments["candidate_inventory"]
    assert len(inventory) == 2000 and call.arguments["select_size"] == 200
    fields = {"candidate_id", "problem_id", "trajectory_ids", "token_count", "uncapped_token_count", "over_cap"}
    fields |= {"length_bin", "domain", "difficulty", "quality_score", "messages"}
    cap = config.data.max_tokens_per_example
    for row in inventory:
        assert set(row) == fields and row["trajectory_ids"] == [row["candidate_id"]]
        assert row["token_count"] == min(row["uncapped_token_count"], cap) and row["over_cap"] is (
            row["uncapped_token_count"] > cap
        )
        assert row["length_bin"] in ("le_4096", "4097_8192", "8193_16384")
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
    # the world's ground truth never reaches the strategy: no defect labels, and no quality signal derived
    # from them (quality_score is the source's, 1.0 here, the same for clean and defective candidates)
    assert '"defect"' not in json.dumps(inventory)
    assert {row["quality_score"] for row in inventory} == {1.0}
    assert {row["difficulty"] for row in inventory} == {"unlabeled"}


def test_a_malformed_judge_request_is_a_strategy_error_with_its_reason(tmp_path):
    strategy = tmp_path / "asks_badly.py"
    strategy.write_text(
        "async def select_trajectories(candidate_inventory, select_size, judge):\n"
        "    await judge([{'question': r['candidate_id']} for r in candidate_inventory[:8]])  # no response\n"
        "    return [r['candidate_id'] for r in candidate_inventory[:select_size]]\n"
    )
    result = CliRunner().invoke(main, ["admit", CONFIG, str(strategy), *_args("judge.enabled=true")])
    assert result.exit_code == 1, result.output  # the strategy's error, shown in text (not only with --json)
    reason = "failed  sandbox_run: select_trajectories: judge: invalid_service_request: requests[0].response: "
    assert reason in result.output and "must be a string (got missing)" in result.output
    assert "line 2, in select_trajectories" in result.output  # the strategy's own frame: where it asked
