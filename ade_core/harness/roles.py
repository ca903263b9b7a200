"""The role-backend interface: how the Harness asks an agent role for a delivery.

A backend receives a role's view (built from one store revision) and returns a delivery; it
never touches the store. The Harness checks and commits what it returns. Backends: the
deterministic ``ScriptedBackend`` (``ade_core.harness.scripted``) drives dry runs and tests;
``ade_core.agents`` adds the ``openai`` backend and picks one per role from ``[agents]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from ade_core.errors import AdeError
from ade_core.schemas.common import Model
from ade_core.schemas.deliveries import (
    Analysis,
    BuilderDelivery,
    PlanProposal,
    PlanSummary,
    ReviewDesign,
    ReviewJudgments,
    RunSummary,
)
from ade_core.schemas.views import AnalyzerView, View
from ade_core.specs import Role


class AgentError(AdeError):
    """A role call produced no delivery (endpoint down, unparseable output); the seconds and tokens it cost.

    ``tokens`` is the total; ``prompt_tokens`` and ``completion_tokens`` its parts where the server
    reported them (``ade status`` shows them per Trial and role).
    """

    def __init__(
        self,
        message: str,
        *,
        seconds: float = 0.0,
        tokens: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ):
        super().__init__(message)
        self.seconds = seconds
        self.tokens = tokens
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.downgrades: tuple[Mapping[str, Any], ...] = ()  # endpoints this call switched to plain text

    def role_feedback(self) -> list[str]:
        """What the role is told before it is asked again: only what it can act on. The server's own words
        (tracebacks, URLs, operator advice) stay in the operator's record of the failed call."""
        return ["the previous call got no answer from the model server; answer the same request again"]


@dataclass(frozen=True)
class AgentReply:
    """A role's delivery, with what the call cost (seconds on the backend's clock, tokens: total and parts)."""

    delivery: BaseModel | Mapping[str, Any]
    seconds: float = 0.0
    tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    output_mode: str | None = None  # how the reply was asked for: 'json_schema' or 'text' (remote backends)
    downgrades: tuple[Mapping[str, Any], ...] = ()  # endpoints this call switched to plain text, and why
    view_trimmed: Mapping[str, Any] | None = None  # what was cut from the view to fit the context, if anything


class RoleBackend(Protocol):
    """Answers agent calls: one delivery per view."""

    async def deliver(self, role: Role, view: View) -> AgentReply:
        """The role's delivery for ``view`` (see ``delivery_model`` for what each role returns)."""
        ...


def delivery_model(view: View) -> type[Model]:
    """The delivery schema a view asks for."""
    if isinstance(view, AnalyzerView):
        return ReviewDesign if view.stage == "design" else Analysis
    models: dict[str, type[Model]] = {
        "coordinator": PlanProposal,
        "builder": BuilderDelivery,
        "review_worker": ReviewJudgments,
        "plan_summarizer": PlanSummary,
        "run_summarizer": RunSummary,
    }
    return models[view.role]
