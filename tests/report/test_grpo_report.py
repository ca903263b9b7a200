"""The report's GRPO section: which steps the rollout browser shows, its static filter, the diagnostics figure."""

from __future__ import annotations

import re

from ade_core.report.training import (
    BROWSER_CSS,
    BROWSER_STEPS,
    RESPONSE_CHARS,
    RolloutGroup,
    TrainingView,
    diagnostics_figure,
    rollout_browser,
    shown_steps,
)


def _rollout(step: int, group: int, outcome: float, response: str = "6*4=24\\boxed{24}") -> dict:
    return {
        "step": step,
        "prompt_group_id": f"{step}/{group}",
        "problem_id": f"p{group}",
        "question": "What is 6 * 4?",
        "response": response,
        "outcome": outcome,
        "extracted_answer": "24" if outcome else "25",
        "process_evidence": {
            "status": "available",
            "dimensions": {"conclusion_support": 1.0, "derivation_soundness": 0.5, "substantive_relevance": 1.0},
        },
        "rule_evidence": {"status": "available", "value": 0.5},
        "score": outcome,
        "reward": outcome,
        "advantage": 0.5 if outcome else -0.5,
        "reward_status": "ok",
        "credit_mode": "identity",
    }


def _view(steps: int = 3) -> TrainingView:
    groups = {}
    for step in range(steps):
        shapes = ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0))
        groups[step] = tuple(
            RolloutGroup(
                prompt_group_id=f"{step}/{g}",
                problem_id=f"p{g}",
                question="What is 6 * 4?",
                group_type=("all_wrong", "mixed", "all_correct")[g],
                rollouts=tuple(_rollout(step, g, o, "x" * (RESPONSE_CHARS + 50) if g == 0 else "ok") for o in shape),
            )
            for g, shape in enumerate(shapes)
        )
    diagnostics = {
        "selected C1/P1/T1": tuple(
            {
                "step": s,
                "zero_variance_share": 0.5,
                "reward_mean": 0.4,
                "outcome_mean": 0.4,
                "advantage_std": 0.9,
                "advantage_abs_max": 1.5,
                "kl": None,
                "response_length_mean": 40.0,
            }
            for s in range(steps)
        ),
    }
    return TrainingView(diagnostics=diagnostics, browsed_trial="C1/P1/T1", steps=groups, total_steps=steps + 20)


def test_the_browser_shows_evenly_spaced_steps_with_the_first_and_the_last():
    assert shown_steps(list(range(5))) == list(range(5))
    picked = shown_steps(list(range(200)))
    assert len(picked) == BROWSER_STEPS and picked[0] == 0 and picked[-1] == 199
    assert picked == sorted(set(picked))


def test_the_browser_lays_out_groups_by_step_with_a_static_group_type_filter():
    html = rollout_browser(_view())
    assert "<script" not in html
    assert html.count('<details class="step"') == 3 and html.count(" open>") == 1  # the first step is open
    assert "3 of 23 steps shown" in html
    for kind in ("all_wrong", "mixed", "all_correct"):
        assert f'href="#rollouts-{kind}"' in html and f'id="rollouts-{kind}"' in html
        assert f"#rollouts-{kind}:target ~ .rollout-browser .group:not(.{kind})" in BROWSER_CSS
        assert len(re.findall(f'<div class="group {kind}"', html)) == 3
    assert "(+50 chars)" in html  # long responses are cut and say by how much
    assert "conclusion 1.000, derivation 0.500, substantive 1.000" in html
    assert "step 0: 3 groups (1 all wrong, 1 mixed, 1 all correct)" in html


def test_the_diagnostics_figure_is_a_png_even_when_a_series_is_not_logged():
    png = diagnostics_figure(_view())
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
