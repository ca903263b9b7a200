"""What the executor granted an Engine process, and the torch threads that follow from it.

The executor declares each request's resources (cores, threads, GPUs) and passes them in
``ADE_EXECUTOR_RESOURCES``. The Engine runs torch with the declared threads, falling back to 𝓑's
``[resources].cpu_threads`` when it runs outside an executor, and records the grant in the package
so that a result can be reproduced with the same threads on any executor.
"""

from __future__ import annotations

import json
import os

from ade_core.schemas.config import ExperimentConfig

RESOURCES_ENV = "ADE_EXECUTOR_RESOURCES"


def granted_resources() -> dict[str, str]:
    """The executor's grant to this process (``{}`` outside an executor or when unreadable)."""
    try:
        found = json.loads(os.environ.get(RESOURCES_ENV) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def apply_threads(config: ExperimentConfig) -> dict[str, str]:
    """Set torch's threads to the executor's declared count (else ``[resources].cpu_threads``); return the grant."""
    import torch

    granted = granted_resources()
    threads = int(granted["threads"]) if granted.get("threads", "").isdigit() else config.resources.cpu_threads
    if threads:
        torch.set_num_threads(threads)
    return {**granted, "torch_threads": str(torch.get_num_threads())}
