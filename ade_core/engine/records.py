"""Records the Engine writes into every Experiment Package, whatever the task (paper Table 8).

Tasks declare only their own records; ``TaskHandle.package_schema`` appends these.
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

# Appendix C.5: review may cover all in-loop responses, by record or by problem.
ENGINE_REVIEW_POOLS: tuple[ReviewPool, ...] = (
    ReviewPool(
        name="eval_responses",
        tasks=(ALL_TASKS,),
        record="eval_responses",
        selections=("all", "records", "groups"),
        min_coverage=0.0,
        group_key="problem_id",
    ),
)
