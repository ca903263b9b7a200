"""Prompts: a role's instruction file, the task's additions, and that role's view — nothing else.

``render_messages`` is the only place a prompt is made. Its inputs are the view model (built by
the Harness from one revision, so it already excludes what the role may not see), the task's
prompt additions for the role, and the reply schema; the view is rendered as its own JSON, so
whatever reaches the model is exactly the view (paper Sec 3.3: information boundaries).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ade_core.agents.contract import envelope_schema
from ade_core.schemas.views import View
from ade_core.specs import ROLES

PROMPTS_DIR = Path(__file__).with_name("prompts")
VIEW_HEADING = "## Your view"
SCHEMA_HEADING = "## Reply schema"

Message = dict[str, str]


@cache
def instructions(role: str) -> str:
    """The shared instruction followed by ``role``'s instruction file."""
    if role not in ROLES:
        raise ValueError(f"no instructions for unknown role {role!r}; roles: {', '.join(ROLES)}")
    shared = (PROMPTS_DIR / "shared.md").read_text(encoding="utf-8").strip()
    own = (PROMPTS_DIR / f"{role}.md").read_text(encoding="utf-8").strip()
    return f"{shared}\n\n{own}\n"


def _json_block(value: object) -> str:
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n```"


def render_messages(
    view: View, additions: Sequence[str] = (), shown: dict[str, Any] | None = None, note: str = ""
) -> list[Message]:
    """Chat messages for one call: instructions (+ task additions) as system, the view and schema as user.
    ``shown`` replaces the view's JSON with a shortened copy of it (``fitting.fit_view``), which ``note``
    then says."""
    system = instructions(view.role)
    if additions:
        system += "\n## Task-specific instructions\n\n" + "\n\n".join(text.strip() for text in additions) + "\n"
    data = view.model_dump(mode="json") if shown is None else shown
    user = (
        (f"{note}\n\n" if note else "") + f"{VIEW_HEADING}\n\n{_json_block(data)}\n\n"
        f"{SCHEMA_HEADING}\n\n{_json_block(envelope_schema(view))}\n\n"
        "Reply with one JSON object that matches the reply schema."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def repair_messages(messages: list[Message], prior: str, feedback: Sequence[str]) -> list[Message]:
    """The first turn of the call, the prior reply, and the targeted feedback on it (paper App. C.9)."""
    problems = "\n".join(f"- {line}" for line in feedback)
    request = (
        "Your reply was refused:\n\n"
        f"{problems}\n\n"
        "Repair only these points, keep everything else unchanged, and reply with the whole corrected "
        "JSON object."
    )
    return [*messages[:2], {"role": "assistant", "content": prior}, {"role": "user", "content": request}]
