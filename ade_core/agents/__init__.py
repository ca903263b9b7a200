"""Research agents: role prompts and the backends that answer them (``offline``, ``openai``).

See ``docs/agents.md``. The role contracts (views and deliveries) are the Harness's schemas in
``ade_core.schemas.views`` and ``ade_core.schemas.deliveries``.
"""

from __future__ import annotations

from ade_core.agents.backends import RoutedBackend, check_endpoints, make_backend, role_endpoints

__all__ = ["RoutedBackend", "check_endpoints", "make_backend", "role_endpoints"]
