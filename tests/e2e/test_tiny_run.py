"""The whole job on the tiny world, for real: `ade run` of the CI preset with the offline agent.

One Run is started, SIGKILLed while a search Trial trains (its Engine, in its own session, is
stopped by the resumed controller) and resumed to completion. Its fork from a mid-run revision,
continued on a Ray cluster, is tests/e2e/test_ray_run.py.
The committed preset and seeds must find a strategy that beats the generic reference.
"""

from __future__ import annotations

import pytest
from tiny_run_steps import KILL_IN

pytestmark = pytest.mark.e2e


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
