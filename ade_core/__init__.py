"""ADE: agentic data engineering for LLMs. Public API for task plugins.

Plugins import only what this module exports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ade_core.errors import (
    AdeError,
    ConfigError,
    DuplicateTaskError,
    MissingHookError,
    PluginError,
    PluginLoadError,
    UnknownInterventionKindError,
    UnknownTaskError,
    did_you_mean,
)
from ade_core.specs import (
    INVALID_REQUEST,
    AdmissionProbe,
    EntryPoint,
    GraderSpec,
    InterventionKind,
    MetricSpec,
    ModuleService,
    OutputValidation,
    PackageSchema,
    Parameter,
    Preset,
    ProbeResult,
    PromptAddition,
    RealizationVerdict,
    RecordSpec,
    ReferenceStrategy,
    ReviewPool,
    RewardExploit,
    ServiceSpec,
    SharedReference,
    StrategyCall,
    StrategyFamily,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    TrainingTrace,
    find_family,
)
from ade_sandbox import InvalidServiceRequest

__version__ = "0.1.0"

from ade_core.config import load_config  # noqa: E402
from ade_core.engine.base_pass_rate import base_pass_rates  # noqa: E402
from ade_core.engine.grading.boxed import BOX, last_boxed  # noqa: E402
from ade_core.engine.pool import LENGTH_BINS, RFTInventory, length_bin, rft_inventory, rft_pool  # noqa: E402
from ade_core.engine.pool import inventory as candidate_inventory  # noqa: E402
from ade_core.plugins import hookimpl  # noqa: E402 - plugins reads __version__
from ade_core.realization import check_claims  # noqa: E402
from ade_core.schemas.artifact import Intervention  # noqa: E402
from ade_core.schemas.config import ExperimentConfig  # noqa: E402

__all__ = [
    "INVALID_REQUEST",
    "AdeError",
    "AdmissionProbe",
    "ConfigError",
    "DuplicateTaskError",
    "EntryPoint",
    "GraderSpec",
    "InterventionKind",
    "InvalidServiceRequest",
    "MetricSpec",
    "MissingHookError",
    "ModuleService",
    "OutputValidation",
    "PackageSchema",
    "Parameter",
    "PluginError",
    "PluginLoadError",
    "Preset",
    "ProbeResult",
    "PromptAddition",
    "RealizationVerdict",
    "RecordSpec",
    "ReferenceStrategy",
    "ReviewPool",
    "RewardExploit",
    "ServiceSpec",
    "SharedReference",
    "StrategyCall",
    "StrategyFamily",
    "StrategyInterface",
    "TaskInputs",
    "TaskSpec",
    "TrainingTrace",
    "UnknownInterventionKindError",
    "UnknownTaskError",
    "__version__",
    "Intervention",
    "check_claims",
    "did_you_mean",
    "find_family",
    "load_config",
    "hookimpl",
    # Data Selection's candidate pool (the Engine reads the same rows).
    "LENGTH_BINS",
    "candidate_inventory",
    # The RFT training pool (Reward Design's probe and task inputs, Curriculum's inventory).
    "rft_pool",
    "rft_inventory",
    "RFTInventory",
    "base_pass_rates",
    "length_bin",
    # The answer the Engine extracts from a response (a reward's extracted_answer).
    "BOX",
    "last_boxed",
    # The configuration model services are built from.
    "ExperimentConfig",
]


# The judge core (ade_core.judging), re-exported for task plugins; imported on first use, so that
# `import ade_core` does not pay for it.
_JUDGING = {
    "Judge": "Judge",
    "OfflineJudgeProvider": "OfflineProvider",
    "Rubric": "Rubric",
    "judge_service": "judge_service",
    "JUDGE_DISABLED_REASON": "DISABLED_REASON",
    # Reward Design's process judge, llm_judge(question_prompt, response_content)
    "PROCESS_DESCRIPTION": "PROCESS_DESCRIPTION",
    "PROCESS_DIMENSIONS": "PROCESS_DIMENSIONS",
    "PROCESS_EVIDENCE_SCHEMA": "PROCESS_EVIDENCE_SCHEMA",
    "PROCESS_SERVICE": "PROCESS_SERVICE",
    "PROCESS_SIGNATURE": "PROCESS_SIGNATURE",
    "process_judge_service": "process_judge_service",
}
__all__ += list(_JUDGING)

# The paper's reward contract (ade_core.reward_contract): shared by Reward Design and the Engine.
_REWARD_CONTRACT = (
    "REWARD_RESULT_SCHEMA",
    "GROUP_INPUT_SCHEMA",
    "GROUP_OUTPUT_SCHEMA",
    "GROUP_TYPES",
    "ROW_PARAMETERS",
    "group_input",
    "group_type",
    "validate_reward_result",
    "validate_group_credit",
)
_REWARD_PROBES = ("reward_admission_probes", "training_scorer", "hacking_rows")
__all__ += list(_REWARD_CONTRACT) + list(_REWARD_PROBES)


if TYPE_CHECKING:  # what the lazy names resolve to (see __getattr__), as type checkers see them
    from ade_core import judging, reward_contract, reward_probes, reward_replay

    Judge = judging.Judge
    OfflineJudgeProvider = judging.OfflineProvider
    Rubric = judging.Rubric
    judge_service = judging.judge_service
    JUDGE_DISABLED_REASON = judging.DISABLED_REASON
    PROCESS_DESCRIPTION = judging.PROCESS_DESCRIPTION
    PROCESS_DIMENSIONS = judging.PROCESS_DIMENSIONS
    PROCESS_EVIDENCE_SCHEMA = judging.PROCESS_EVIDENCE_SCHEMA
    PROCESS_SERVICE = judging.PROCESS_SERVICE
    PROCESS_SIGNATURE = judging.PROCESS_SIGNATURE
    process_judge_service = judging.process_judge_service
    REWARD_RESULT_SCHEMA = reward_contract.REWARD_RESULT_SCHEMA
    GROUP_INPUT_SCHEMA = reward_contract.GROUP_INPUT_SCHEMA
    GROUP_OUTPUT_SCHEMA = reward_contract.GROUP_OUTPUT_SCHEMA
    GROUP_TYPES = reward_contract.GROUP_TYPES
    ROW_PARAMETERS = reward_contract.ROW_PARAMETERS
    group_input = reward_contract.group_input
    group_type = reward_contract.group_type
    validate_reward_result = reward_contract.validate_reward_result
    validate_group_credit = reward_contract.validate_group_credit
    reward_admission_probes = reward_probes.reward_admission_probes
    hacking_rows = reward_probes.hacking_rows
    training_scorer = reward_replay.training_scorer


def __getattr__(name: str) -> object:
    if name in _JUDGING:
        from ade_core import judging

        return getattr(judging, _JUDGING[name])
    if name in _REWARD_CONTRACT:
        from ade_core import reward_contract

        return getattr(reward_contract, name)
    if name in _REWARD_PROBES:  # the paper's reward probes (ade_core.reward_probes, ade_core.reward_replay)
        from ade_core import reward_probes, reward_replay

        return getattr(reward_replay if name == "training_scorer" else reward_probes, name)
    raise AttributeError(f"module 'ade_core' has no attribute {name!r}")
