"""What a model must return for one call, and how a reply is read and checked.

A reply is one JSON object, the *envelope*: it echoes the call (``role``, ``subject``,
``basis_revision`` of the view) and carries the ``delivery`` of the role's schema. The echo lets
the backend refuse an answer to a different question (another role, a stale view) before the
Harness sees it. Every problem found is phrased as targeted feedback, so a repair request names
only what is wrong (paper App. C.9).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ade_core.harness.roles import AgentError, delivery_model
from ade_core.schemas.common import Model
from ade_core.schemas.views import View

MAX_FEEDBACK = 12  # problems listed in one repair request; the rest follow once these are fixed
# A reasoning model's thoughts come before its answer; only that leading block is dropped, since a
# delivery may itself mention think tags (a strategy that checks a trajectory's think span).
_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


class DeliveryInvalid(AgentError):
    """The model's deliveries stayed invalid after every repair attempt; ``feedback`` says why."""

    def __init__(self, message: str, feedback: list[str], **cost: Any):
        super().__init__(message, **cost)
        self.feedback = feedback

    def role_feedback(self) -> list[str]:
        """The repair feedback on the role's own output: something it can act on."""
        return [f"the previous replies were not a valid delivery: {'; '.join(self.feedback)}"]


@dataclass(frozen=True)
class Refusal:
    """A reply the backend cannot pass on, with what to fix."""

    feedback: list[str]


def envelope_schema(view: View) -> dict[str, Any]:
    """JSON Schema of the reply to ``view``: the echoed call and the role's delivery."""
    model = delivery_model(view)
    delivery = model.model_json_schema()
    definitions = delivery.pop("$defs", {})
    schema: dict[str, Any] = {
        "title": f"{view.role} reply",
        "type": "object",
        "properties": {
            "role": {"const": view.role, "description": "The role called (echo the view's role)."},
            "subject": {"const": view.subject, "description": "The call's subject (echo the view's subject)."},
            "basis_revision": {
                "const": view.basis_revision,
                "description": "The view's basis_revision (echo it).",
            },
            "delivery": delivery,
        },
        "required": ["role", "subject", "basis_revision", "delivery"],
        "additionalProperties": False,
    }
    if definitions:
        schema["$defs"] = definitions
    return schema


def extract_json(text: str) -> Any:
    """The JSON object in a reply: the whole text, a fenced block, or the outermost braces."""
    text = _THINK.sub("", text, count=1).strip()
    candidates = [(0, text)]  # (where it starts in the reply, the candidate)
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append((fenced.start(1), fenced.group(1)))
    if "{" in text and "}" in text:
        candidates.append((text.index("{"), text[text.index("{") : text.rindex("}") + 1]))
    errors: list[json.JSONDecodeError] = []
    for offset, candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:  # where it failed, in the reply's own characters
            errors.append(json.JSONDecodeError(exc.msg, text, offset + exc.pos))
    # the candidate that parsed furthest names the real mistake (a fence's backticks fail at character 0)
    raise max(errors, key=lambda error: (error.pos, -errors.index(error)))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _validation_feedback(exc: ValidationError) -> list[str]:
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in ("delivery", *error["loc"]))
        if error["type"] == "missing":
            lines.append(f"{where}: required field is missing; add it")
        elif error["type"] == "extra_forbidden":
            lines.append(f"{where}: not a field of this delivery; remove it")
        else:
            lines.append(f"{where}: {error['msg']} (got {_shown(error.get('input'))})")
    return lines


def read_reply(text: str, view: View, *, truncated: bool = False) -> Model | Refusal:
    """The validated delivery in ``text``, or what is wrong with it."""
    try:
        envelope = extract_json(text)
    except json.JSONDecodeError as exc:
        cut = " The reply was cut off at the completion token limit; return a shorter delivery." if truncated else ""
        near = exc.doc[max(0, exc.pos - 30) : exc.pos + 10].replace("\n", "\\n")
        return Refusal(
            [
                f"the reply is not one JSON object ({exc.msg} at line {exc.lineno} column {exc.colno}, character "
                f"{exc.pos}, near {near!r}); return only the JSON object.{cut}"
            ]
        )
    if not isinstance(envelope, dict):
        return Refusal([f"the reply is a JSON {type(envelope).__name__}, not an object; return one JSON object"])
    feedback = []
    for key, wanted in (("role", view.role), ("subject", view.subject), ("basis_revision", view.basis_revision)):
        if key not in envelope:
            feedback.append(f"{key}: missing; echo the view's {key} ({_shown(wanted)})")
        elif envelope[key] != wanted:
            feedback.append(f"{key}: this call is for {_shown(wanted)} (got {_shown(envelope[key])}); echo the view's")
    extra = sorted(set(envelope) - {"role", "subject", "basis_revision", "delivery"})
    if extra:
        feedback.append(f"{', '.join(extra)}: not part of the reply; put the role's output under 'delivery'")
    if "delivery" not in envelope:
        feedback.append("delivery: missing; put the role's output under 'delivery'")
    else:
        try:
            delivery = delivery_model(view).model_validate(envelope["delivery"])
        except ValidationError as exc:
            feedback.extend(_validation_feedback(exc))
        else:
            if not feedback:
                return delivery
    if len(feedback) > MAX_FEEDBACK:
        feedback = [*feedback[:MAX_FEEDBACK], f"... and {len(feedback) - MAX_FEEDBACK} more problems"]
    return Refusal(feedback)
