"""The SFT candidate pool: complete chat trajectories whose quality varies by documented defects.

Every candidate is one user-assistant trajectory with one ``<think>...</think>`` span and a
non-empty final answer. Defect labels are the world's ground truth: written to a separate file,
never shown to a strategy or an agent.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ade_core.tiny.problems import MathProblem

DEFECTS: dict[str, str] = {
    "wrong_answer": "the working is right but the boxed answer is off",
    "wrong_step": "an intermediate result is wrong and the error carries into the answer",
    "repetition_loop": "a step repeats literally inside the think span",
    "truncated": "the think span runs past the token cap before the answer",
    "missing_box": "the final answer is given without \\boxed{}",
    "off_domain": "the think span wanders into unrelated text before answering",
    "duplicate_question": "the same question as another candidate, answered again",
    "meandering": "a correct but long, rambling think span",
}
# Chosen by ADE: weighted toward defects that need judgement (wrong answers, wrong steps).
DEFAULT_RATES: dict[str, float] = {
    "wrong_answer": 0.14,
    "wrong_step": 0.14,
    "repetition_loop": 0.04,
    "truncated": 0.04,
    "missing_box": 0.04,
    "off_domain": 0.04,
    "duplicate_question": 0.03,
    "meandering": 0.03,
}
CHAT_TOPICS = (
    ("Spell the word {w} backwards.", lambda w: w[::-1]),
    ("How many letters are in the word {w}?", lambda w: str(len(w))),
    ("Write the word {w} in capital letters.", lambda w: w.upper()),
)
WORDS = (
    "apple",
    "river",
    "stone",
    "cloud",
    "tiger",
    "lemon",
    "piano",
    "candle",
    "forest",
    "planet",
    "mirror",
    "garden",
)
FILLER = "the weather is mild and the shops open at nine "


@dataclass(frozen=True)
class Candidate:
    """One trajectory, its group (math / chat) and its ground-truth defect (None when clean)."""

    candidate_id: str
    domain: str
    problem_id: str
    messages: tuple[dict[str, str], ...]
    defect: str | None

    def to_group(self) -> dict[str, object]:
        """The inventory form a Data Selection strategy sees (no defect label)."""
        return {
            "candidate_id": self.candidate_id,
            "domain": self.domain,
            "problem_id": self.problem_id,
            "trajectories": [
                {
                    "trajectory_id": f"{self.candidate_id}-t0",
                    "messages": list(self.messages),
                    "token_count": sum(len(m["content"]) for m in self.messages),
                }
            ],
        }


def _perturb(value: str, rng: random.Random) -> str:
    number = int(value)
    return str(number + rng.choice([-3, -2, -1, 1, 2, 3, 10]))


def math_trajectory(problem: MathProblem, defect: str | None, rng: random.Random, cap_chars: int) -> str:
    """The assistant message for ``problem`` with ``defect`` applied."""
    think, answer = problem.solution, problem.answer
    if defect == "wrong_answer":
        answer = _perturb(answer, rng)
    elif defect == "wrong_step":
        # corrupt the last intermediate result and carry it to the answer
        head, _, last = think.rpartition("=")
        answer = _perturb(last, rng) if last.strip("-").isdigit() else _perturb(answer, rng)
        think = f"{head}={answer}" if head else think
    elif defect == "repetition_loop":
        step = think.split("; ")[0]
        think = "; ".join([step] * rng.randint(4, 7) + [think])
    elif defect == "off_domain":
        think = FILLER * 2 + think
    elif defect == "meandering":
        think = f"let me think. {think}. let me check again. {think}. yes"
    if defect == "truncated":
        return "<think>" + (think + ", " + FILLER * 8)[:cap_chars]
    body = f"<think>{think}</think>"
    return body + (answer if defect == "missing_box" else f"\\boxed{{{answer}}}")


def build_candidates(
    problems: Sequence[MathProblem],
    chat_count: int,
    seed: int,
    rates: Mapping[str, float] = DEFAULT_RATES,
    cap_chars: int = 200,
) -> list[Candidate]:
    """One candidate per problem plus ``chat_count`` non-math ones; defects drawn at ``rates``."""
    unknown = sorted(set(rates) - set(DEFECTS))
    if unknown or sum(rates.values()) >= 1:
        raise ValueError(f"defect rates must name known defects and sum below 1 (unknown {unknown})")
    rng = random.Random(seed)
    names, weights = list(rates), list(rates.values())
    out: list[Candidate] = []
    math_ids: list[int] = []
    for index, problem in enumerate(problems):
        defect = rng.choices([None, *names], weights=[1 - sum(weights), *weights])[0]
        source = problem
        if defect == "duplicate_question" and math_ids:
            source = problems[rng.choice(math_ids)]
        content = math_trajectory(source, None if defect == "duplicate_question" else defect, rng, cap_chars)
        messages = ({"role": "user", "content": source.problem}, {"role": "assistant", "content": content})
        out.append(Candidate(f"m{index:05d}", "math", source.unique_id, messages, defect))
        math_ids.append(index)
    for index in range(chat_count):
        template, solve = CHAT_TOPICS[index % len(CHAT_TOPICS)]
        word = rng.choice(WORDS)
        question = template.format(w=word)
        answer = solve(word)
        defect = rng.choices([None, "wrong_answer"], weights=[0.8, 0.2])[0]
        shown = answer[::-1] if defect == "wrong_answer" and len(answer) > 1 else answer
        content = f"<think>{question.lower()} -> {answer}</think>{shown}"
        messages = ({"role": "user", "content": question}, {"role": "assistant", "content": content})
        out.append(Candidate(f"c{index:05d}", "chat", f"chat/{index}", messages, defect if shown != answer else None))
    return out
