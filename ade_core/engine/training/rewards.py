"""Rewards during GRPO: the trusted outcome grader in the Engine, the agent's reward in the sandbox.

The task's row reward (``compute_score``, its ``compute_fallback_score``) and optional group credit
(``assign_group_credit``) are agent-written code: they run in an ``ade_sandbox`` worker loaded
once per training run, never inside the trainer process, with ``llm_judge`` set as a module global
when judge enrichment is on. Every row gets a typed status; nothing fails silently to zero:

- ``ok``: the row reward, validated against ``ade.reward_result.v2``;
- ``process_unavailable``: ``llm_judge`` answered ``unavailable``, so the fallback scored the row;
- ``reward_exception`` / ``reward_timeout`` / ``reward_invalid`` (and the sandbox's other statuses,
  prefixed ``reward_``): the row reward failed, so the fallback scored the row;
- ``fallback_failed``: the fallback failed too, so the row trains on the verified outcome.

With group credit, ``compute_score`` must return the outcome (any other score is ``reward_invalid``).
Under judge enrichment the Engine gathers process evidence, in batches, for every rollout the reward
did not judge itself: the group input's evidence, and what a later reward is replayed on.
A group whose credit is invalid, or whose credit breaks the advantage-sign guard in a mixed group
(a correct response without a positive advantage, or an incorrect one with a positive advantage),
trains on outcome credit, and the group is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ade_core.engine.grading.boxed import last_boxed
from ade_core.engine.training.advantages import advantages
from ade_core.harness.static_policy import defined_entry_points
from ade_core.judging.process import PROCESS_SERVICE, ProcessJudge
from ade_core.reward_contract import (
    ROW_PARAMETERS,
    group_input,
    not_configured_process,
    validate_group_credit,
    validate_reward_result,
)
from ade_core.specs import GraderSpec, StrategyInterface
from ade_sandbox import Limits, Service, Worker, open_worker

EVIDENCE_BATCH = 64  # rollouts per process-judge call when the Engine gathers evidence itself


@dataclass
class Rollout:
    """One scored completion (a row of the rollout record)."""

    step: int
    problem_id: str
    group: int
    response: str
    num_tokens: int
    outcome: float
    score: float
    extracted_answer: str = ""
    question: str = ""
    process: dict[str, Any] = field(default_factory=not_configured_process)
    projection: float | None = None
    rule_evidence: dict[str, Any] | None = None
    pre_group_reward: float = 0.0
    reward: float = 0.0
    advantage: float = 0.0
    reward_status: str = "ok"
    credit_mode: str | None = None  # the group's decision (identity / abstained / shaped), or why it fell back


def sign_guard_holds(group: Sequence[Rollout], values: Sequence[float]) -> bool:
    """In a mixed group, correct responses keep a positive advantage and incorrect ones a non-positive one."""
    outcomes = [r.outcome == 1.0 for r in group]
    if all(outcomes) or not any(outcomes):
        return True
    return all((value > 0) if correct else (value <= 0) for correct, value in zip(outcomes, values, strict=True))


def _process_evidence(result: Any) -> dict[str, Any] | None:
    """The evidence ``llm_judge`` answered during one call, or None when it was not asked."""
    for call in reversed(result.service_calls):
        if call.name == PROCESS_SERVICE:
            if call.ok and isinstance(call.value, dict):
                return call.value
            return {"status": "unavailable", "dimensions": None, "reason": call.error or "refused"}
    return None


@dataclass
class RewardPipeline:
    """Scores completions: outcome by the grader, score by the reward module, credit by groups."""

    grader: GraderSpec
    group_size: int
    reward_source: str | None = None
    scale: float = 1.0
    call_timeout_s: float = 10.0
    max_tokens: int = 0  # the response token limit, passed to the reward module
    services: Iterable[Service] = ()
    interface: StrategyInterface | None = None
    process_judge: ProcessJudge | None = None  # under judge enrichment: evidence for every rollout
    estimator: str = "grpo"
    # The text the grader and the reward module see, from the completion's token ids; TRL's own
    # decoding skips special tokens, which would hide <think>/</think> from every reward.
    decode: Callable[[Sequence[int]], str] | None = None
    worker: Worker | None = None
    group_credit: bool = False
    step: int = 0
    last_batch: list[Rollout] = field(default_factory=list)
    failures: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    guard_violations: int = 0

    def __post_init__(self) -> None:
        if self.reward_source is not None:
            self.worker = open_worker(
                self.reward_source,
                limits=Limits(wall_s=24 * 3600, cpu_s=24 * 3600),
                call_timeout_s=self.call_timeout_s,
                services=list(self.services),
            )
            if self.interface is not None:
                self.group_credit = "assign_group_credit" in defined_entry_points(self.reward_source, self.interface)

    # TRL calls this with the batch's completions and the dataset columns as keyword lists.
    def __call__(self, prompts: list[Any], completions: list[Any], completion_ids: list[list[int]], **columns: Any):
        if self.decode is not None:
            texts = [self.decode(ids) for ids in completion_ids]
        else:
            texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        batch = []
        for index, (text, ids) in enumerate(zip(texts, completion_ids, strict=True)):
            answer = columns["answer"][index]
            outcome = 1.0 if self._grade(text, answer) else 0.0
            rollout = Rollout(
                self.step,
                str(columns["problem_id"][index]),
                index // self.group_size,
                text,
                len(ids),
                outcome,
                outcome,
                extracted_answer=last_boxed(text) or "",
                question=prompts[index][-1]["content"] if isinstance(prompts[index], list) else str(prompts[index]),
            )
            if self.worker is not None:
                self._score(rollout, rollout.question)
            rollout.pre_group_reward = rollout.score
            batch.append(rollout)
        if self.process_judge is not None:  # every rollout's evidence, for group credit and for replay
            questions = [p[-1]["content"] if isinstance(p, list) else str(p) for p in prompts]
            self._gather_evidence(batch, questions)
        self.last_batch = batch
        return [r.score * self.scale for r in batch]

    def _grade(self, text: str, answer: Any) -> bool:
        try:
            return bool(self.grader.grade(text, answer))
        except Exception:  # a grader failure scores 0 and stays in the denominator
            return False

    def _row_arguments(self, rollout: Rollout, question: str) -> dict[str, Any]:
        values = (
            question,
            rollout.response,
            rollout.extracted_answer,
            rollout.outcome,
            rollout.num_tokens,
            self.max_tokens,
        )
        return dict(zip(ROW_PARAMETERS, values, strict=True))

    def _call(self, entry: str, arguments: dict[str, Any]) -> Any:
        assert self.worker is not None
        if self.worker.dead:
            self.worker.start()
        return self.worker.call(entry, arguments)

    def _score(self, rollout: Rollout, question: str) -> None:
        """The row reward, else its fallback (typed status), else the verified outcome."""
        arguments = self._row_arguments(rollout, question)
        result = self._call("compute_score", arguments)
        evidence = _process_evidence(result)
        if evidence is not None:
            rollout.process = evidence
        status = "ok"
        if evidence is not None and evidence.get("status") != "available":
            status = "process_unavailable"
        elif result.status != "ok":
            status = f"reward_{result.status}"
        else:
            verdict = validate_reward_result(result.value, arguments)
            if (
                verdict.ok
                and self.group_credit
                and (result.value["score"] != rollout.outcome or result.value["artifact_projection"] is not None)
            ):
                status = "reward_invalid"  # with group credit the row reward keeps the outcome
            elif not verdict.ok:
                status = "reward_invalid"
            else:
                self._take(rollout, result.value)
                return
        self._count(status)
        rollout.reward_status = status
        fallback = self._call("compute_fallback_score", arguments)
        checked = validate_reward_result(fallback.value, arguments, fallback=True) if fallback.status == "ok" else None
        if checked is not None and checked.ok:
            self._take(rollout, fallback.value)
        else:
            self._count("fallback_failed")
            rollout.reward_status, rollout.score = "fallback_failed", rollout.outcome

    def _take(self, rollout: Rollout, value: dict[str, Any]) -> None:
        rollout.score = float(value["score"])
        rollout.projection = value["artifact_projection"]
        rollout.rule_evidence = value["rule_evidence"]

    def _count(self, status: str) -> None:
        self.failures += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def _gather_evidence(self, batch: list[Rollout], questions: list[str]) -> None:
        """Process evidence for every rollout the reward did not judge itself, asked of the judge in
        batches: group credit's input, and the record a later reward is replayed on."""
        assert self.process_judge is not None
        missing = [i for i, r in enumerate(batch) if r.process.get("status") == "not_configured"]
        for start in range(0, len(missing), EVIDENCE_BATCH):
            chunk = missing[start : start + EVIDENCE_BATCH]
            requests = [{"question_prompt": questions[i], "response_content": batch[i].response} for i in chunk]
            for index, evidence in zip(chunk, self.process_judge.batch(requests), strict=True):
                batch[index].process = evidence

    def training_rewards(self) -> list[float]:
        """Rewards the advantages are computed from: group credit when defined, else the row scores."""
        batch = self.last_batch
        rewards = [r.score for r in batch]
        for start in range(0, len(batch), self.group_size):
            group = batch[start : start + self.group_size]
            credited = self._credit(group) if self.group_credit and self.worker is not None else None
            if credited is not None:
                values = advantages(credited, self.group_size, self.estimator)
                if sign_guard_holds(group, values):
                    rewards[start : start + self.group_size] = credited
                else:
                    self.guard_violations += 1
                    rewards[start : start + self.group_size] = [r.outcome for r in group]
                    for rollout in group:
                        rollout.credit_mode = "sign_guard_outcome"
        rewards = [value * self.scale for value in rewards]
        for rollout, reward in zip(batch, rewards, strict=True):
            rollout.reward = reward
        return rewards

    def _credit(self, group: list[Rollout]) -> list[float] | None:
        rows = [
            {
                "outcome_score": r.outcome,
                "pre_group_reward": r.pre_group_reward,
                "process": r.process,
                "rule_evidence": r.rule_evidence,
                "response_length_tokens": r.num_tokens,
            }
            for r in group
        ]
        built = group_input(rows, self.max_tokens)
        result = self._call("assign_group_credit", {"group_input": built})
        verdict = validate_group_credit(result.value, built) if result.status == "ok" else None
        if verdict is None or not verdict.ok:
            self._count("group_credit_invalid")
            reason = result.error if verdict is None else "; ".join(verdict.errors)
            for rollout in group:
                rollout.credit_mode = f"invalid: {str(reason)[:200]}"
            return [r.outcome for r in group]
        for rollout in group:
            rollout.credit_mode = verdict.canonical["decision"]["mode"]
        return [a["training_reward"] for a in verdict.canonical["assignments"]]

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
