"""``ade sample`` end to end: IID on the tiny world's model, VS and Groot against an OpenAI-compatible server.

Each run is a real ``sampling`` request on the local executor (``ade engine sample`` in its own
process); the records, the filtered dataset and the summary are read back from OUT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.testing import run_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from chat_server import ChatServer  # noqa: E402
from test_samplers import scripted  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "tiny-data-selection-ci.toml"
ADE = str(Path(sys.executable).with_name("ade"))


def ade(*args: str) -> subprocess.CompletedProcess[str]:
    return run_command([ADE, *args], idle_s=30, cwd=REPO)


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


@pytest.mark.trial
def test_iid_on_the_tiny_world_samples_grades_filters_and_resumes(tmp_path):
    out = tmp_path / "iid"
    args = ("sample", str(CONFIG), "--sampler", "iid", "--budget", "2", "--problems", "tiny:rft_pool")
    args += ("--limit", "3", "--out", str(out), "--filter", "rft", "--temperature", "0.8", "--max-new-tokens", "48")
    done = ade(*args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert (summary["problems"], summary["responses"], summary["leaked"]) == (3, 6, 0)
    assert summary["correct"] == sum(s["correct"] for r in records(out) for s in r["samples"])
    assert summary["filter"]["responses"] == summary["correct"] >= 1  # the tiny base solves some
    rows = [json.loads(line) for line in (out / "rft.jsonl").read_text().splitlines()]
    assert sum(len(row["trajectories"]) for row in rows) == summary["correct"]
    assert all(t["messages"][0]["role"] == "system" for row in rows for t in row["trajectories"])
    again = ade(*args)  # everything recorded: resumed, nothing drawn again
    assert again.returncode == 0, again.stderr[-3000:]
    assert "3/3 problems sampled" in again.stderr and len(records(out)) == 3
    changed = ade(*args[:-4], "--temperature", "0.5", "--max-new-tokens", "48")
    assert changed.returncode != 0 and "temperature: 0.8 -> 0.5" in changed.stderr


@pytest.mark.parametrize("sampler", ["verbalized", "groot"])
def test_strategic_samplers_against_an_openai_compatible_server(sampler, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(
            json.dumps({"problem_id": pid, "problem": f"[{pid}] What is 2 + 2?", "answer": "4"}) + "\n"
            for pid in ("p-ok", "p-short", "p-bad")
        )
    )
    out = tmp_path / sampler
    with ChatServer(reply=scripted) as server:
        done = ade(
            "sample", str(CONFIG), "--sampler", sampler, "--budget", "4", "--problems", str(problems),
            "--out", str(out), "--server", server.url, "--served-model", "scripted", "--filter", "anti",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "plans: 1 ok, 1 short, 1 malformed" in done.stdout
    assert "2 dropped for naming their approach" in done.stdout  # one approach of p-ok and of p-short leaks
    summary = json.loads((out / "summary.json").read_text())
    assert summary["planning_tokens"] > 0 and summary["responses"] == 7 and summary["leaked"] == 2
    anti = [json.loads(line) for line in (out / "anti.jsonl").read_text().splitlines()]
    wrong = [t for row in anti for t in row["trajectories"]]
    assert len(wrong) == 2 and all(not t["correct"] for t in wrong)  # the "answer 5" approach of two problems
    bad = next(r for r in records(out) if r["problem_id"] == "p-bad")
    assert bad["plan"]["status"] == "malformed" and bad["plan"]["raw"] == "I would just add the numbers."


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--sampler", "beam"), "'beam' is not one of"),
        (("--budget", "0"), "budget = 0 must be >= 1"),
        (("--problems", "nowhere.jsonl"), "does not exist"),
        (("--served-model", "x"), "--served-model names a model on a server"),
    ],
)
def test_bad_input_is_refused_with_the_fix(extra, says, tmp_path):
    args = {"--sampler": "iid", "--budget": "2", "--problems": "tiny:rft_pool", "--out": str(tmp_path / "o")}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        args[flag] = value
    done = ade("sample", str(CONFIG), *[part for pair in args.items() for part in pair])
    assert done.returncode != 0 and says in done.stderr, done.stderr
    assert not (tmp_path / "o" / "samples.jsonl").exists()


@pytest.mark.trial
def test_eval_reports_pass_at_k_of_a_checkpoint_next_to_base_on_a_cached_frontier(tmp_path):
    import shutil

    from ade_core.engine.data import resolve_model

    checkpoint = tmp_path / "checkpoint"  # the base weights saved as a checkpoint: it must score as Base does
    shutil.copytree(resolve_model(REPO, "tiny"), checkpoint)
    env = {**os.environ, "ADE_CACHE_DIR": str(tmp_path / "cache")}
    args = ("eval", str(checkpoint), "--config", str(CONFIG), "--samples", "4", "--passk", "1,4", "--limit", "4")
    args += ("--frontier", "--frontier-samples", "4", "--frontier-max", "3", "--out", str(tmp_path / "e"), "--json")
    args += ("--no-reference",)  # tests/e2e/test_eval_reference.py scores the reference column

    def evaluate() -> subprocess.CompletedProcess[str]:
        return run_command([ADE, *args], idle_s=30, cwd=REPO, env=env)

    done = evaluate()
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    scores = result["scores"]
    assert set(scores) == {"checkpoint", "Base"} and scores["checkpoint"] == scores["Base"]
    assert set(scores["Base"]) == {"pass@1", "pass@4"} and 0 <= scores["Base"]["pass@1"] <= scores["Base"]["pass@4"]
    frontier = result["frontier"]
    assert frontier["of"] == 4 and 1 <= frontier["problems"] <= 4 and Path(frontier["cache"]).is_dir()
    assert len(records(tmp_path / "e" / "base")) == frontier["problems"]
    again = evaluate()
    assert json.loads(again.stdout)["scores"] == scores  # the cached frontier, the recorded samples
    short = ade("eval", str(CONFIG), "--samples", "2", "--passk", "1,4", "--out", str(tmp_path / "s"))
    assert short.returncode != 0 and "pass@4 needs at least 4 samples per problem, but 2 are drawn" in short.stderr
    bare = ade("eval", str(checkpoint), "--samples", "2", "--out", str(tmp_path / "b"))
    assert bare.returncode != 0 and "--config CONFIG" in bare.stderr


@pytest.mark.trial
def test_eval_adds_rsa_pass_at_1_on_the_tiny_world(tmp_path):
    # The tiny model reads 256 characters: a terse aggregation prompt of one's own and short responses.
    template = tmp_path / "aggregate.txt"
    template.write_text("{problem}\n{candidates}\n")
    done = ade(
        "eval", str(CONFIG), "--limit", "2", "--rsa", "--rsa-population", "2", "--set", "evaluation.pass_k=[1, 2]",
        "--set", "evaluation.in_loop.k_offline=2",
        "--rsa-subset", "2", "--rsa-iterations", "1", "--rsa-runs", "1", "--out", str(tmp_path / "e"), "--json",
        "--rsa-prompt", str(template), "--set", "evaluation.decoding.max_new_tokens=24", "--no-reference",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    scores = result["scores"]
    assert set(scores) == {"Base"} and 0 <= scores["Base"]["rsa pass@1"] <= 100
    # No --samples / --passk: the config's k_offline and [evaluation] pass_k apply.
    assert result["samples"] == 2 and {"pass@1", "pass@2"} <= set(scores["Base"])
    assert all(len(record["samples"]) == 2 for record in records(tmp_path / "e" / "base"))
    rsa = json.loads((tmp_path / "e" / "base-rsa" / "rsa.json").read_text())
    (run,) = rsa["runs"]
    assert len(run["pass@1_by_round"]) == 2 and [len(members) for members in run["populations"]] == [2, 2]
    assert all(sorted(m["parents"]) == [0, 1] for members in run["populations"] for m in members)
    bad = ade(
        "eval",
        str(CONFIG),
        "--samples",
        "2",
        "--passk",
        "1",
        "--rsa",
        "--rsa-subset",
        "20",
        "--out",
        str(tmp_path / "x"),
    )
    assert bad.returncode != 0 and "rsa subset = 20 exceeds the population (16)" in bad.stderr
