"""Records the Engine writes into every Experiment Package (paper Table 8), by training paradigm.

Tasks declare only their own records; ``TaskHandle.package_schema`` appends these, and
``TaskHandle.review_pools`` the review pools over them (paper Appendix C.5).
"""

from __future__ import annotations

from ade_core.specs import ALL_TASKS, RecordSpec, ReviewPool

ENGINE_RECORDS: tuple[RecordSpec, ...] = (
    RecordSpec(
        name="training_log",
        description="Loss, learning rate, gradient norm (and for GRPO reward, KL, entropy) per step.",
        readable_by=("analyzer",),
    ),
    RecordSpec(
        name="checkpoint_scores",
        description="Online evaluation of every published checkpoint and which one was selected.",
        readable_by=("analyzer", "plan_summarizer"),
    ),
    RecordSpec(
        name="eval_responses",
        description="In-loop evaluation responses of the selected checkpoint, with grades.",
        readable_by=("analyzer", "review_worker"),
    ),
)

# Appendix C.5: review covers all in-loop responses (100 %), by record or by problem.
ENGINE_REVIEW_POOLS: tuple[ReviewPool, ...] = (
    ReviewPool(
        name="eval_responses",
        tasks=(ALL_TASKS,),
        record="eval_responses",
        selections=("all", "records", "groups"),
        min_coverage=1.0,  # Sec 4: all in-loop responses are reviewed
        group_key="problem_id",
    ),
)

# What the Engine's trainers write for every task of a paradigm.
PARADIGM_RECORDS: dict[str, tuple[RecordSpec, ...]] = {
    "sft": (
        RecordSpec(
            name="selected_examples",
            description="The selected examples as trained, with per-example truncation; held_apart marks the "
            "validation slice [checkpoint] select = 'validation_loss' scores instead of training on.",
            readable_by=("analyzer", "review_worker"),
        ),
    ),
    "rft": (
        RecordSpec(
            name="training_rollouts",
            description="Rollouts per step: outcome, extracted answer, process evidence, row score, projection, "
            "rule evidence, pre-group reward, training reward, realized advantage, row status and group decision.",
            readable_by=("analyzer", "review_worker"),
        ),
        RecordSpec(
            name="step_diagnostics",
            description="Per GRPO step: zero-variance group share, mean reward and verified outcome, advantage "
            "statistics, response length, KL, entropy, clip fraction.",
            readable_by=("analyzer", "plan_summarizer"),
        ),
        RecordSpec(
            name="reward_health",
            description="Rows that did not train on the reward as written (fallbacks by typed status), mixed "
            "groups trained on outcome credit after breaking the advantage-sign guard, and whether the mean "
            "reward rose while the verified outcome fell (reward_outcome_divergence).",
            readable_by=("analyzer", "plan_summarizer"),
        ),
    ),
}

# Appendix C.5: SFT review covers all trained examples (100 %); RFT review covers >= 25% of rollout groups.
PARADIGM_REVIEW_POOLS: dict[str, tuple[ReviewPool, ...]] = {
    "sft": (
        ReviewPool(
            name="selected_examples",
            tasks=(ALL_TASKS,),
            record="selected_examples",
            selections=("all", "records"),
            min_coverage=1.0,  # Sec 4 / App. D.1: all selected training examples are reviewed
        ),
    ),
    "rft": (
        ReviewPool(
            name="training_rollouts",
            tasks=(ALL_TASKS,),
            record="training_rollouts",
            selections=("groups",),
            min_coverage=0.25,
            group_key="prompt_group_id",
        ),
    ),
}
