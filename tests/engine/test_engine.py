"""The Engine end to end on CPU: SFT and GRPO attempts, packages, re-runs, held-out isolation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_world import GRPO_TOML, SFT_TOML, build_world, make_job, sft_job

from ade_core.engine.attempt import HEARTBEAT, run_attempt
from ade_core.engine.evaluation import evaluate
from ade_core.engine.heldout import evaluate_heldout, score_heldout
from ade_core.engine.job import EngineJob, load_heldout_batch, load_job
from ade_core.engine.model import EngineError
from ade_core.engine.package import PackageTamperedError, open_package
from ade_core.executors.factory import make_executor
from ade_core.executors.slots import usable_cpus
from ade_core.harness.heldout import HeldOutError, HeldOutStore, score_through, split_batches
from ade_core.plugins import load_plugins
from ade_core.schemas.artifact import Intervention
from ade_core.schemas.operational import ExecutorSettings

ADE = str(Path(sys.executable).with_name("ade"))
REWARD_MODULE = """
CALLS = [0]


def _outcome(outcome_score):
    return {"schema_version": "ade.reward_result.v2", "score": float(outcome_score), "outcome_score": outcome_score,
            "artifact_projection": None, "rule_evidence": {"status": "not_configured", "value": None}}


async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    CALLS[0] += 1
    if CALLS[0] % 3 == 0:
        raise ValueError("every third row fails")
    return _outcome(outcome_score)


def compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                           response_length_tokens, max_response_length_tokens):
    return _outcome(outcome_score)


def assign_group_credit(group_input):
    records = group_input["records"]
    shaped = group_input["group_type"] == "all_wrong"
    return {"schema_version": "ade.group_credit_output.v2",
            "decision": {"mode": "shaped" if shaped else "identity", "evidence_sources": ["outcome"],
                         "process_dimensions": [], "reason_code": "first_wrong_gets_a_quarter"},
            "assignments": [{"record_id": r["record_id"],
                             "training_reward": (0.25 if r["record_id"] == 0 else 0.0) if shaped
                             else r["outcome_score"]} for r in records]}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="module")
def sft_package(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft-attempt")
    return run_attempt(sft_job(world), out), out


def test_sft_attempt_produces_a_sealed_package(sft_package, world):
    package, out = sft_package
    opened = open_package(package)
    manifest = opened.manifest
    assert manifest.status == "completed" and manifest.task == "data_selection"
    assert manifest.selected_step in [c.step for c in manifest.checkpoints] and len(manifest.checkpoints) == 2
    assert set(manifest.in_loop_scores) == {"pass_at_k", "average_at_k"}
    assert {"ade-core", "ade-sandbox", "ade-task-data-selection"} <= set(manifest.versions)
    names = {r.name for r in manifest.records}
    assert names == {"selected_examples", "training_log", "checkpoint_scores", "eval_responses"}
    responses = opened.records("eval_responses")
    assert len(responses) == 4 * 3  # every in-loop problem x K_offline
    # every response joins back to its problem: real id, benchmark and sample index
    from ade_core.engine.data import benchmark_rows, resolve_path, row_id

    in_loop = sft_job(world).config.evaluation.in_loop
    problems = {row_id(row): row for row in benchmark_rows(resolve_path(world, in_loop.source))[: in_loop.limit]}
    assert {r["problem_id"] for r in responses} == set(problems)
    assert {r["benchmark"] for r in responses} == {in_loop.name}
    for problem in problems:
        assert sorted(r["sample"] for r in responses if r["problem_id"] == problem) == list(range(in_loop.k_offline))
    assert json.loads((out / HEARTBEAT).read_text())["phase"] == "done"


def test_sft_lowers_loss_and_changes_parameters(sft_package, world):
    import torch
    from transformers import AutoModelForCausalLM

    package, _ = sft_package
    opened = open_package(package)
    losses = [entry["loss"] for entry in opened.records("training_log") if "loss" in entry]
    assert losses[-1] < losses[0]
    trained = AutoModelForCausalLM.from_pretrained(opened.manifest.selected_checkpoint)
    base = AutoModelForCausalLM.from_pretrained(world / "model")
    assert trained.get_input_embeddings().weight.shape[0] == base.get_input_embeddings().weight.shape[0] + 2
    changed = [
        name
        for (name, p), (_, q) in zip(trained.named_parameters(), base.named_parameters(), strict=True)
        if p.shape == q.shape and not torch.equal(p, q)
    ]
    assert len(changed) > 10


def test_selected_examples_record_truncation(sft_package):
    examples = open_package(sft_package[0]).records("selected_examples")
    assert len(examples) == 12 and all(e["tokens"] <= 48 for e in examples)
    assert any(e["truncated"] for e in examples) == any(e["original_tokens"] > 48 for e in examples)


def test_package_tampering_is_detected(sft_package, tmp_path):
    import shutil

    copy = tmp_path / sft_package[0].name
    shutil.copytree(sft_package[0], copy)
    target = copy / "eval_responses.jsonl"
    os.chmod(copy, 0o755)
    os.chmod(target, 0o644)
    target.write_text(target.read_text().replace('"correct":false', '"correct":true', 1))
    with pytest.raises(PackageTamperedError, match="does not match its recorded digest"):
        open_package(copy)
    assert oct(os.stat(sft_package[0] / "eval_responses.jsonl").st_mode)[-3:] == "444"


def test_config_digest_mismatch_is_refused(world):
    job = sft_job(world)
    forged = job.model_copy(update={"config": job.config.model_copy(update={"name": "changed"})})
    with pytest.raises(EngineError, match="does not match the command"):
        forged.check()


def test_missing_evaluation_is_not_zero(world):
    registry = load_plugins()
    job = sft_job(world)
    result = evaluate(
        world / "no-such-checkpoint",
        [{"id": "x", "problem": "1+1", "answer": "2"}],
        2,
        config=job.config,
        grader=registry.graders()["boxed_exact"],
        metrics=registry.task("data_selection").metrics(),
        seed=0,
        benchmark="in_loop",
        workers=1,
    )
    assert result.missing and result.scores is None and result.missing_reason


def test_evaluation_records_name_their_problem_whatever_the_id_field(world, sft_package):
    """Benchmarks key problems by problem_id, id or unique_id (MATH's field); every record keeps the real one."""
    registry = load_plugins()
    job = sft_job(world)
    rows = [
        {"unique_id": "math/algebra/1", "problem": "What is 1+1?", "answer": "2"},
        {"problem_id": "p-7", "problem": "What is 2+2?", "answer": "4"},
        {"id": 3, "problem": "What is 3+3?", "answer": "6"},
    ]
    result = evaluate(
        Path(open_package(sft_package[0]).manifest.selected_checkpoint),
        rows,
        2,
        config=job.config,
        grader=registry.graders()["boxed_exact"],
        metrics=registry.task("data_selection").metrics(),
        seed=0,
        benchmark="mixed",
        workers=1,
    )
    assert [(r["problem_id"], r["benchmark"], r["sample"]) for r in result.responses] == [
        (pid, "mixed", sample) for pid in ("math/algebra/1", "p-7", "3") for sample in (0, 1)
    ]


def test_heldout_goes_to_its_own_store(sft_package, world, tmp_path):
    package = open_package(sft_package[0])
    store = tmp_path / "heldout-store"
    record = evaluate_heldout(sft_job(world), Path(package.manifest.selected_checkpoint), store)
    assert set(record["benchmarks"]) == {"heldout"} and record["macro_avg"]["pass_at_k"] is not None
    assert "heldout" not in json.dumps([r.model_dump() for r in package.manifest.records])
    with pytest.raises(EngineError, match="append-only"):
        evaluate_heldout(sft_job(world), Path(package.manifest.selected_checkpoint), store)


SECOND_HELDOUT = '[[evaluation.held_out]]\nname = "again"\nsource = "bench.jsonl"\ngrader = "{grader}"\nk = 3\n'


def two_benchmark_job(world: Path, grader: str = "boxed_exact") -> EngineJob:
    """The SFT job with a second held-out benchmark (another file) graded by ``grader``."""
    toml = SFT_TOML.replace("[evaluation.decoding]", SECOND_HELDOUT.format(grader=grader) + "[evaluation.decoding]")
    return make_job(world, toml, sft_job(world).command.intervention, f"two-benchmarks-{grader}")


def test_heldout_suite_scores_as_lone_evaluations(sft_package, world):
    """One generator and one grading pool for the suite: each benchmark gets what a lone evaluation gets."""
    registry = load_plugins()
    job = two_benchmark_job(world)
    checkpoint = Path(open_package(sft_package[0]).manifest.selected_checkpoint)
    scored = score_heldout(job, checkpoint, registry)
    assert list(scored["benchmarks"]) == ["heldout", "again"]
    for bench in job.config.evaluation.held_out:
        from ade_core.engine.data import benchmark_rows, resolve_path

        rows = benchmark_rows(resolve_path(world, bench.source))
        alone = evaluate(
            checkpoint,
            rows,
            bench.k,
            config=job.config,
            grader=registry.graders()[bench.grader],
            metrics=registry.task("data_selection").metrics(),
            seed=job.command.seeds["evaluation"],
            benchmark=bench.name,
            workers=1,
        )
        result = scored["benchmarks"][bench.name]
        assert result["scores"] == alone.scores and result["responses"] == alone.responses
        assert result["problems"] == len(rows) and result["k"] == bench.k
    lost = score_heldout(job, world / "no-such-checkpoint", registry)
    assert all(b["scores"] is None and b["missing_reason"] for b in lost["benchmarks"].values())
    assert set(lost["macro_avg"].values()) == {None}  # missing, never zero


def test_heldout_requests_through_the_executor_match_in_process(sft_package, world, tmp_path):
    """The report's held-out pass: one one-thread ``heldout`` request per core the local executor has, each
    scoring its batch of checkpoints in one process, scores what this process scores with one thread; so
    does one request scoring the whole batch; a failing one is raised, typed."""
    import torch

    job = two_benchmark_job(world)
    package = open_package(sft_package[0]).manifest
    saved = sorted(str(path) for path in Path(package.selected_checkpoint).parent.iterdir() if path.is_dir())
    checkpoints = [saved[-1], saved[0]]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        expected = [score_heldout(job, Path(c)) for c in checkpoints]
    finally:
        torch.set_num_threads(threads)
    held = HeldOutStore(tmp_path / "run")
    resources = job.config.resources

    def through(jobs, workers=None):
        executor = make_executor(ExecutorSettings(), resources)
        got = list(score_through(executor, jobs, [Path(c) for c in checkpoints], held, job.config, workers))
        return got, executor.timeline()

    got, spans = through([job, job])
    assert [index for index, _ in got] == [0, 1]
    assert [scored for _, scored in got] == expected
    assert len(spans) == min(2, len(usable_cpus())) and {s.kind for s in spans} == {"heldout"}
    got, spans = through([job, job], workers=1)
    assert [scored for _, scored in got] == expected and len(spans) == 1  # both checkpoints in one process
    assert not list((held.root / "work").iterdir()), "the scratch of a recorded pass is removed"
    broken = two_benchmark_job(world, grader="nope")
    with pytest.raises(HeldOutError, match="unknown grader 'nope'"):
        through([job, broken])


def test_held_out_batches_split_in_order_and_a_bad_batch_file_is_a_typed_error(tmp_path):
    assert split_batches(list(range(6)), 2) == [[0, 1, 2], [3, 4, 5]]
    assert split_batches(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert split_batches([4], 1) == [[4]]
    (tmp_path / "batch.json").write_text('{"items": []}')
    with pytest.raises(EngineError, match="not a valid held-out batch"):
        load_heldout_batch(tmp_path / "batch.json")
    with pytest.raises(EngineError, match="batch file not found"):
        load_heldout_batch(tmp_path / "missing.json")


def test_grpo_with_reward_module_and_group_credit(world, tmp_path):
    toml = GRPO_TOML.format(task="reward_design", shuffle="true", estimator="grpo")
    job = make_job(world, toml, Intervention(kind="reward_module", payload={"source": REWARD_MODULE}, summary="r"))
    package = open_package(run_attempt(job, tmp_path / "rd"))
    rollouts = package.records("training_rollouts")
    assert len(rollouts) == 3 * 2 * 4  # steps x prompts x rollouts
    # every third row's reward raised: the fallback scored it, with a typed status
    assert [r["reward_status"] for r in rollouts] == ["ok", "ok", "reward_exception"] * 8
    assert all(r["score"] == r["outcome"] == r["pre_group_reward"] for r in rollouts)
    assert all(r["process_evidence"]["status"] == "not_configured" for r in rollouts)  # judge enrichment off
    for start in range(0, len(rollouts), 4):
        group = rollouts[start : start + 4]
        assert abs(sum(r["advantage"] for r in group)) < 1e-6  # group-relative
        if not any(r["outcome"] for r in group):  # group credit replaced the all-wrong group's rewards
            assert [r["reward"] for r in group] == [0.25, 0.0, 0.0, 0.0] and group[0]["credit_mode"] == "shaped"
        else:
            assert [r["reward"] for r in group] == [r["outcome"] for r in group]
    (health,) = package.records("reward_health")
    assert health == {
        "row_statuses": {"reward_exception": 8},
        "sign_guard_violations": 0,
        "rollouts": 24,
        "reward_outcome_divergence": {"assessed": False, "flagged": False, "reason": "fewer than 4 steps"},
    }
    diagnostics = package.records("step_diagnostics")
    assert [d["step"] for d in diagnostics] == [0, 1, 2] and all(d["groups"] == 2 for d in diagnostics)
    for d, start in zip(diagnostics, range(0, 24, 8), strict=True):
        step = rollouts[start : start + 8]
        assert d["outcome_mean"] == pytest.approx(sum(r["outcome"] for r in step) / 8)
        assert d["reward_mean"] == pytest.approx(sum(r["reward"] for r in step) / 8)
        assert d["kl"] is not None and d["entropy"] is not None and 0 <= d["zero_variance_share"] <= 1
    assert package.manifest.status == "completed"


def test_curriculum_is_consumed_in_schedule_order_with_maxrl(world, tmp_path):
    schedule = [["q5", "q1"], ["q0", "q7"], ["q3", "q5"]]
    toml = GRPO_TOML.format(task="curriculum", shuffle="false", estimator="maxrl")
    job = make_job(world, toml, Intervention(kind="schedule", payload={"batches": schedule}, summary="3x2"))
    package = open_package(run_attempt(job, tmp_path / "cl"))
    consumed = [r["problem_ids"] for r in package.records("consumed_problems")]
    assert consumed == schedule  # the curriculum's own record, built through its intervention kind
    assert all(
        r["matches_schedule"] and r["scheduled_ids"] == r["problem_ids"] for r in package.records("consumed_problems")
    )
    for r in package.records("training_rollouts"):
        assert r["reward"] in (0.0, 1.0)


def test_curriculum_with_shuffling_is_refused(world, tmp_path):
    toml = GRPO_TOML.format(task="curriculum", shuffle="true", estimator="grpo")
    job = make_job(world, toml, Intervention(kind="schedule", payload={"batches": [["q1", "q2"]]}, summary="s"))
    with pytest.raises(EngineError, match="shuffle_data = false"):
        run_attempt(job, tmp_path / "bad")


def test_maxrl_with_a_reward_module_is_refused(world, tmp_path):
    toml = GRPO_TOML.format(task="reward_design", shuffle="true", estimator="maxrl")
    job = make_job(world, toml, Intervention(kind="reward_module", payload={"source": REWARD_MODULE}, summary="r"))
    with pytest.raises(EngineError, match="maxrl"):
        run_attempt(job, tmp_path / "bad")


def test_cli_run_and_a_killed_attempt_rerun_reproduces(world, tmp_path, sft_package):
    job_file = tmp_path / "job.json"
    job_file.write_text(sft_job(world).model_dump_json())
    assert load_job(job_file).command.task == "data_selection"
    out = tmp_path / "attempt"
    env = {**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    proc = subprocess.Popen(
        [ADE, "engine", "run", str(job_file), "--out", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        beat = out / HEARTBEAT
        if beat.exists() and json.loads(beat.read_text() or "{}").get("phase") in ("train", "online_eval"):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = subprocess.run(
        [ADE, "engine", "run", str(job_file), "--out", str(out)], env=env, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    result = json.loads(rerun.stdout.strip().splitlines()[-1])
    reference = open_package(sft_package[0]).manifest
    assert result["selected_step"] == reference.selected_step
    assert result["in_loop_scores"] == reference.in_loop_scores


def test_bad_command_file_is_a_clean_error(tmp_path):
    bad = tmp_path / "job.json"
    bad.write_text("{}")
    proc = subprocess.run(
        [ADE, "engine", "run", str(bad), "--out", str(tmp_path / "o")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.startswith("EngineError:") and "Traceback" not in proc.stderr


def test_engine_job_schema_round_trips(world):
    job = sft_job(world)
    assert EngineJob.model_validate_json(job.model_dump_json()) == job
