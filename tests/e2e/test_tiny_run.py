"""The whole job on the tiny world, for real: `ade run` of the CI preset with the offline agent.

One Run is started, SIGKILLed while a search Trial trains (its Engine, in its own session, is
stopped by the resumed controller), resumed to completion, compared with a third-party strategy
run through `ade trial`, and forked from a mid-run revision; the fork completes as its own Run.
The committed preset and seeds must find a strategy that beats the generic reference.
"""

from __future__ import annotations

import json

import pytest
from tiny_run_steps import KILL_IN, ade, status

from ade_core.store import RunStore


def test_progress_reported_training_steps_before_the_kill(killed_and_resumed) -> None:
    events = killed_and_resumed["events"]
    stages = [e["trial"]["stage"] for e in events if "trial" in e]
    assert "train" in stages and {e["phase"] for e in events} >= {"bootstrap"}
    p000 = [e["trial"] for e in events if e.get("trial", {}).get("trial_id") == "P000/T1"]
    assert [t["stage"] for t in p000][-1] in ("completed", "memory update")
    assert any(t["stage"] == "online eval" for t in p000) and any(t["stage"] == "offline eval" for t in p000)


def test_the_killed_run_resumes_to_completion(killed_and_resumed) -> None:
    killed, resumed, final = (killed_and_resumed[k] for k in ("killed", "resumed", "final"))
    assert killed["phase"] == "search"
    running = {t["trial_id"]: t for p in killed["plans"] for t in p["trials"]}
    assert running[KILL_IN]["status"] == "running"
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert final["phase"] == "completed"
    trials = {t["trial_id"]: t for p in final["plans"] for t in p["trials"]}
    assert set(trials) == {"P000/T1", "C1/P1/T1", "C1/P2/T1"}
    assert {t["status"] for t in trials.values()} == {"completed"}
    assert trials[KILL_IN]["attempts"] == 2  # the killed attempt, then a fresh one
    assert not killed_and_resumed["orphan_alive_after_resume"]  # its Engine did not run on beside the retry
    assert "Pass@K" in resumed.stdout and "★" in resumed.stdout  # the summary table
    assert (killed_and_resumed["run_dir"] / "report.html").is_file()
    held = final["held_out"]["evaluations"]  # the CI preset evaluates only the final selection
    assert [(e["scope"], e["trial_id"]) for e in held] == [("final_selection", final["selection"]["trial_id"])]


def test_an_agent_strategy_beats_the_generic_reference(killed_and_resumed) -> None:
    final = killed_and_resumed["final"]
    trials = {t["trial_id"]: t for p in final["plans"] for t in p["trials"]}
    reference = trials["P000/T1"]["scores"]["average_at_k"]
    found = {tid: t["scores"]["average_at_k"] for tid, t in trials.items() if tid != "P000/T1"}
    assert max(found.values()) > reference, (
        f"no agent-developed strategy beat the generic reference ({reference:.1f}): {found}; the demo "
        "config, seeds or the offline policy changed what the Run finds"
    )
    assert final["selection"]["plan_id"] != "P000"


def test_a_third_party_strategy_ran_alongside(killed_and_resumed) -> None:
    code, out, err, _ = killed_and_resumed["trial"]
    assert code == 0, err[-3000:]
    result = json.loads(out)
    assert result["trial"]["status"] == "completed" and result["trial"]["in_loop_scores"]["average_at_k"] >= 0
    assert result["reference"]["in_loop_scores"] and result["base"]["in_loop_scores"]
    # the first Trial under this config announced the extra work, did it before the user's Trial, and
    # the elapsed time covers all of it
    assert "first Trial under this config: it will also train the generic reference and evaluate the untrained" in err
    assert err.index("reference Trial (cached in") < err.index("Base: evaluating") < err.rindex("engine: training")
    timings = result["timings_s"]
    assert result["elapsed_s"] >= timings["reference"] + timings["Base"] + timings["strategy"]
    assert "Warning" not in err  # third-party deprecation warnings stay out of the terminal


def test_ade_trial_shows_base_and_the_reference_and_their_differences(killed_and_resumed) -> None:
    code, _, err, shown = killed_and_resumed["trial"]
    assert code == 0, err[-3000:]
    lines = shown.splitlines()
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split() == ["metric", "strategy", "Base", "reference", "vs", "Base", "vs", "ref"]
    row = next(line for line in lines if line.startswith("average_at_k")).split()
    mine, base, reference, vs_base, vs_ref = (float(x) for x in row[1:6])
    assert vs_base == pytest.approx(mine - base, abs=0.11) and vs_ref == pytest.approx(mine - reference, abs=0.11)
    assert lines[-1].startswith("elapsed ") and "reference" in lines[-1] and "Base" in lines[-1]
    before, after = killed_and_resumed["admits"]
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert "not computed for this config yet" in before.stdout  # admit never trains or evaluates
    assert "cached for this config (in-loop):" in after.stdout and "Base" in after.stdout


def test_a_fork_from_a_mid_run_revision_completes_as_its_own_run(killed_and_resumed) -> None:
    run_dir = killed_and_resumed["run_dir"]
    with RunStore.open(run_dir) as store:
        # the last revision before the second search Plan existed: the fork runs only that Plan
        revision = min(e.revision for e in store.events() if e.subject.startswith("C1/P2")) - 1
    fork_dir = killed_and_resumed["root"] / "fork"
    forked = ade("fork", f"{run_dir}@{revision}", "--run-dir", str(fork_dir))
    assert forked.returncode == 0, forked.stderr
    resumed = ade("resume", str(fork_dir), "--progress", "none")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    fork = status(fork_dir)
    assert fork["phase"] == "completed" and fork["forked_from"] == f"run@{revision}"
    trials = {t["trial_id"] for p in fork["plans"] for t in p["trials"]}
    assert trials == {"P000/T1", "C1/P1/T1", "C1/P2/T1"}
    assert (fork_dir / "report.html").is_file()
