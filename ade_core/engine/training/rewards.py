"""Rewards during GRPO: the trusted outcome grader in the Engine, the agent's reward in the sandbox.

The task's row-level reward and optional group credit are agent-written code: they run in an
``ade_sandbox`` worker loaded once per training run, never inside the trainer process.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any

from ade_core.engine.grading.boxed import last_boxed
from ade_core.specs import GraderSpec
from ade_sandbox import Limits, Worker, open_worker

GROUP_INPUT_SCHEMA = "ade.group_credit_input.v3"


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
    reward: float = 0.0
    advantage: float = 0.0
    reward_status: str = "ok"


def defines(source: str, name: str) -> bool:
    """Whether the module source defines a top-level function ``name``."""
    tree = ast.parse(source)
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def _unit(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
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
    worker: Worker | None = None
    group_credit: bool = False
    step: int = 0
    last_batch: list[Rollout] = field(default_factory=list)
    failures: int = 0

    def __post_init__(self) -> None:
        if self.reward_source is not None:
            self.worker = open_worker(
                self.reward_source, limits=Limits(wall_s=24 * 3600, cpu_s=24 * 3600), call_timeout_s=self.call_timeout_s
            )
            self.group_credit = defines(self.reward_source, "assign_group_credit")

    # TRL calls this with the batch's completions and the dataset columns as keyword lists.
    def __call__(self, prompts: list[Any], completions: list[Any], completion_ids: list[list[int]], **columns: Any):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        batch = []
        for index, (text, ids) in enumerate(zip(texts, completion_ids, strict=True)):
            answer = columns["answer"][index]
            outcome = 1.0 if self._grade(text, answer) else 0.0
            rollout = Rollout(
                self.step, str(columns["problem_id"][index]), index // self.group_size, text, len(ids), outcome, outcome
            )
            if self.worker is not None:
                self._score(rollout, prompts[index], answer, len(ids))
            batch.append(rollout)
        self.last_batch = batch
        return [r.score * self.scale for r in batch]

    def _grade(self, text: str, answer: Any) -> bool:
        try:
            return bool(self.grader.grade(text, answer))
        except Exception:  # a grader failure scores 0 and stays in the denominator
            return False

    def _score(self, rollout: Rollout, prompt: Any, answer: Any, num_tokens: int) -> None:
        assert self.worker is not None
        if self.worker.dead:
            self.worker.start()
        question = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        result = self.worker.call(
            "compute_score",
            {
                "question_prompt": question,
                "response_content": rollout.response,
                "extracted_answer": last_boxed(rollout.response) or "",
                "outcome_score": rollout.outcome,
                "response_length_tokens": num_tokens,
                "max_response_length_tokens": self.max_tokens,
            },
        )
        score = _unit(result.value.get("score")) if result.ok and isinstance(result.value, dict) else None
        if score is None:
            self.failures += 1
            rollout.score, rollout.reward_status = 0.0, f"reward {result.status}: {result.error or 'invalid score'}"
        else:
            rollout.score = score

    def training_rewards(self) -> list[float]:
        """Rewards the advantages are computed from: group credit when defined, else the row scores."""
        batch = self.last_batch
        rewards = [r.score * self.scale for r in batch]
        if self.group_credit and self.worker is not None:
            for start in range(0, len(batch), self.group_size):
                group = batch[start : start + self.group_size]
                credited = self._credit(group)
                if credited is not None:
                    rewards[start : start + self.group_size] = [c * self.scale for c in credited]
        for rollout, reward in zip(batch, rewards, strict=True):
            rollout.reward = reward
        return rewards

    def _credit(self, group: list[Rollout]) -> list[float] | None:
        assert self.worker is not None
        correct = [r.outcome == 1.0 for r in group]
        kind = "all_correct" if all(correct) else ("all_wrong" if not any(correct) else "mixed")
        ids = [f"{r.problem_id}/{i}" for i, r in enumerate(group)]
        records = [
            {
                "record_id": rid,
                "outcome_score": r.outcome,
                "is_correct": r.outcome == 1.0,
                "score": r.score,
                "evidence": {"process": {"status": "unavailable"}},
            }
            for rid, r in zip(ids, group, strict=True)
        ]
        if self.worker.dead:
            self.worker.start()
        result = self.worker.call(
            "assign_group_credit",
            {"group_input": {"schema_version": GROUP_INPUT_SCHEMA, "group_type": kind, "records": records}},
        )
        value = result.value if result.ok and isinstance(result.value, dict) else {}
        by_id = {r.get("record_id"): _unit(r.get("reward")) for r in value.get("rewards", []) if isinstance(r, dict)}
        if set(by_id) != set(ids) or any(v is None for v in by_id.values()):
            self.failures += 1
            for rollout in group:
                rollout.reward_status = f"group credit {result.status}: {result.error or 'invalid rewards'}"
            return None
        return [by_id[rid] for rid in ids]  # type: ignore[misc]

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
