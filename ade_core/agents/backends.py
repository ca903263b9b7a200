"""Which backend answers each role, from the operational ``[agents]`` and ``[review]`` settings."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ade_core.agents.offline import OfflinePolicy
from ade_core.errors import ConfigError
from ade_core.harness.roles import AgentReply, RoleBackend
from ade_core.plugins import TaskHandle
from ade_core.schemas.config import AgentEndpoint, OperationalSettings
from ade_core.schemas.views import View
from ade_core.specs import ROLES, Role


class RoutedBackend:
    """Sends each role to its own backend (e.g. an LLM for research roles, offline review)."""

    def __init__(self, backends: Mapping[str, RoleBackend]):
        missing = [role for role in ROLES if role not in backends]
        if missing:
            raise ValueError(f"no backend for role(s) {', '.join(missing)}")
        self.backends = dict(backends)

    async def deliver(self, role: Role, view: View) -> AgentReply:
        return await self.backends[role].deliver(role, view)


SESSION_ROLES = ("builder", "analyzer")  # answered by the Coordinator's session under ``unified``


def role_endpoints(operational: OperationalSettings, *, one_session: bool = False) -> dict[str, AgentEndpoint]:
    """Every role's resolved settings: [agents], then [review] or [agents.roles.<role>].

    ``one_session`` (research method ``unified``): the Builder and Analyzer use the Coordinator's
    settings, since one session plans, builds and analyzes (their own overrides do not apply).
    """
    endpoints = {role: operational.agents.for_role(role, operational.review) for role in ROLES}
    if one_session:
        endpoints.update({role: endpoints["coordinator"] for role in SESSION_ROLES})
    return endpoints


def check_endpoints(operational: OperationalSettings) -> None:
    """Refuse, before a run starts, settings no request could succeed with (no network is used)."""
    for role, endpoint in role_endpoints(operational).items():
        if endpoint.backend == "openai" and endpoint.base_url is None and not os.environ.get(endpoint.api_key_env):
            raise ConfigError(
                f"role {role} uses the openai backend at the OpenAI API, but ${endpoint.api_key_env} is not set; "
                "export your key there, or point agents.base_url at a local server (see docs/agents.md)"
            )


def make_backend(
    operational: OperationalSettings,
    task: TaskHandle,
    *,
    latency: Mapping[str, float] | None = None,
    virtual_time: bool = False,
    one_session: bool = False,
) -> RoleBackend:
    """The backend the run's settings ask for.

    ``offline`` roles get the deterministic research policy of ``ade_core.agents.offline``
    (``latency``: the seconds it reports); ``openai`` roles get ``OpenAIBackend`` with the task's
    prompt additions. ``virtual_time``: the run is a dry run on the virtual clock, so requests block
    instead of running in threads. ``one_session``: see ``role_endpoints``.
    """
    endpoints = role_endpoints(operational, one_session=one_session)
    offline = OfflinePolicy(latency)
    remote = {role: e for role, e in endpoints.items() if e.backend == "openai"}
    if not remote:
        return offline
    from ade_core.agents.openai_backend import OpenAIBackend  # imports the openai client only when used

    additions = {role: tuple(p.text for p in task.prompt_additions(role)) for role in remote}
    llm = OpenAIBackend(remote, additions, blocking=virtual_time)
    return RoutedBackend({role: llm if role in remote else offline for role in ROLES})
