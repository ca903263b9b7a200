"""𝓑 as pydantic models: the frozen ExperimentConfig and the undigested operational settings.

Defaults are the paper's where it gives one (Appendix D); values the paper leaves open are
marked "chosen by ADE" in their description.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ade_core.schemas.common import Digest, Model, sha256_digest
from ade_core.schemas.operational import (  # noqa: F401  (re-exported: the operational half of a config file)
    ISOLATION_LEVELS,
    AgentEndpoint,
    AgentSettings,
    ExecutorSettings,
    GenerationSettings,
    OperationalSettings,
    RecoverySettings,
    ReportSettings,
    ReviewSettings,
    SandboxSettings,
)
from ade_core.schemas.training import (  # noqa: F401  (re-exported: the [training] section)
    DeepSpeedConfig,
    GRPORecipe,
    LoRAConfig,
    OptimizerCommon,
    SFTRecipe,
    TrainingConfig,
)
from ade_core.specs import TASK_NAME_PATTERN


class ModelConfig(Model):
    """The target model and how its tokenizer is prepared."""

    target: str = Field(description="Local path of the base model, or 'tiny' for the embedded tiny model.")
    chat_template: str = Field(
        default="qwen", description="Chat template family used to render conversations (paper: Qwen)."
    )
    special_tokens: tuple[str, ...] = Field(
        default=("<think>", "</think>"),
        description="Tokens added to the vocabulary (with embedding resize) when missing (paper Appendix D.3).",
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        default="float32", description="Weight dtype for training and generation."
    )
    chat_template_kwargs: dict[str, bool | int | float | str] = Field(
        default_factory=dict,
        description="Extra variables for every chat-template rendering (training, pool token counts, rollouts, "
        "evaluation), e.g. { enable_thinking = false } for Qwen3-style templates (paper: the SFT target's native "
        "thinking is disabled).",
    )


class PoolConfig(Model):
    """How the candidate pool is drawn from the source data (paper Appendix D.1)."""

    size: int = Field(gt=0, description="Rows in the candidate pool (paper SFT: 3,840; RFT: 3,072 problems).")
    groups: dict[str, float] = Field(
        default_factory=dict,
        description="Relative weights of source groups (e.g. math/code/science); largest-remainder allocation.",
    )
    seed: int = Field(default=0, description="Seed of per-group reservoir sampling and the final shuffle.")

    @model_validator(mode="after")
    def _positive_weights(self) -> PoolConfig:
        bad = {k: v for k, v in self.groups.items() if v <= 0}
        if bad:
            raise ValueError(f"group weights must be > 0, got {bad}")
        return self


class DataConfig(Model):
    """Candidate data, the intervention's size, and the per-example token cap."""

    source: str = Field(description="'tiny' for the embedded world, or a local JSONL file of source rows.")
    pool: PoolConfig = Field(description="Candidate pool construction.")
    select_size: int | None = Field(
        default=None, gt=0, description="Trajectories a selector returns (paper Data Selection: 384)."
    )
    max_tokens_per_example: int = Field(
        gt=0, description="Training-example token cap; longer examples are truncated and recorded."
    )
    base_pass_rate_samples: int = Field(
        default=0,
        ge=0,
        le=64,
        description="K samples of the base model per RFT pool problem for the Curriculum inventory's optional "
        "base_pass_rate column (beyond the paper; cached per model digest). 0: no column.",
    )

    @model_validator(mode="after")
    def _select_within_pool(self) -> DataConfig:
        if self.select_size is not None and self.select_size > self.pool.size:
            raise ValueError(
                f"select_size must be <= pool.size (got select_size={self.select_size}, pool.size={self.pool.size})"
            )
        return self


class BudgetConfig(Model):
    """Research budget in candidate counts (paper Appendix D.4)."""

    coordinators: int = Field(default=1, ge=1, description="C: concurrent Coordinators (paper: 1 or 3).")
    plans_per_coordinator: int = Field(default=5, ge=1, description="B_P: Plans per Coordinator (paper: 5).")
    trials_per_plan: int = Field(default=1, ge=1, description="B_T: Trials per Plan (paper: 1).")
    builder_reflections: int = Field(
        default=2,
        ge=0,
        description="J: Builder reflections before delivery (paper: 2); each development check the Builder "
        "asks for is one of them.",
    )
    agent_retries: int = Field(default=3, ge=1, description="Attempts per agent delivery (paper: 3).")
    engine_attempts: int = Field(default=3, ge=1, description="Engine attempts per Trial (paper: 3).")


class CheckpointConfig(Model):
    """Which checkpoints are published for online evaluation."""

    every_steps: int | None = Field(default=None, gt=0, description="Save every N steps (paper RFT: 4).")
    every_epoch: bool = Field(default=False, description="Save at the end of each epoch.")
    include_final: bool = Field(default=True, description="Always publish the last checkpoint.")
    select: Literal["all", "validation_loss"] = Field(
        default="all",
        description="'all': publish every saved checkpoint (online evaluation picks among them); "
        "'validation_loss' (SFT, seed 001): hold apart validation_fraction of the selected examples, score every "
        "saved checkpoint's loss on them, and publish only the lowest.",
    )
    validation_fraction: float = Field(
        default=0.1,
        gt=0,
        lt=1,
        description="Share of the selected examples held apart when select = 'validation_loss' (chosen by ADE: 0.1).",
    )

    @model_validator(mode="after")
    def _some_rule(self) -> CheckpointConfig:
        if self.every_steps is None and not self.every_epoch and not self.include_final:
            raise ValueError("no checkpoint would be published; set every_steps, every_epoch or include_final")
        return self


class DecodingConfig(Model):
    """Sampling settings shared by every evaluation purpose (paper Appendix D.5)."""

    temperature: float = Field(default=0.6, ge=0, description="Sampling temperature (paper: 0.6).")
    top_p: float = Field(default=0.95, gt=0, le=1, description="Nucleus sampling (paper: 0.95).")
    max_context_tokens: int = Field(default=32768, gt=0, description="Context length (paper: 32,768).")
    max_new_tokens: int = Field(default=16384, gt=0, description="New-token limit (paper: 16,384).")
    reasoning_reserve_tokens: int | None = Field(
        default=None, gt=0, description="Tokens reserved for reasoning (paper SFT: 8,192; RFT: none)."
    )

    @model_validator(mode="after")
    def _fits(self) -> DecodingConfig:
        if self.max_new_tokens > self.max_context_tokens:
            raise ValueError(
                f"max_new_tokens must be <= max_context_tokens (got {self.max_new_tokens} > {self.max_context_tokens})"
            )
        return self


class GenerationConfig(Model):
    """How evaluation samples its responses: the backend that runs the model (paper Appendix D.5)."""

    backend: Literal["hf", "vllm", "openai"] = Field(
        default="hf",
        description="'hf': transformers in the Engine's process (CPU or GPU); 'vllm': an in-process vLLM engine "
        "(needs the `gpu` extra); 'openai': an OpenAI-compatible server at [operational.generation].base_url "
        "that loads the checkpoint (chosen by ADE: 'hf', which runs anywhere).",
    )


class EngineConfig(Model):
    """How the Engine runs what 𝓑 fixes."""

    generation: GenerationConfig = Field(
        default_factory=GenerationConfig, description="Generation backend of every evaluation."
    )


class BenchmarkConfig(Model):
    """One evaluation set and its grader."""

    name: str = Field(min_length=1, description="Benchmark name, e.g. 'aime24'.")
    source: str = Field(description="Local JSONL file, or 'tiny:<split>' for the embedded world.")
    grader: str = Field(default="boxed_exact", description="Grader name from an installed plugin.")
    limit: int | None = Field(
        default=None,
        gt=0,
        description="Evaluate only the first N problems of the source (chosen by ADE: for short real-model demos).",
    )


class InLoopBenchmark(BenchmarkConfig):
    """The in-loop benchmark D_in with its two sample budgets (paper Sec 3.2)."""

    k_online: int = Field(gt=0, description="Samples per problem for checkpoint selection.")
    k_offline: int = Field(gt=0, description="Samples per problem for the Trial's in-loop score.")

    @model_validator(mode="after")
    def _offline_at_least_online(self) -> InLoopBenchmark:
        if self.k_offline < self.k_online:
            raise ValueError(
                f"k_offline must be >= k_online (got k_online={self.k_online}, k_offline={self.k_offline})"
            )
        return self


class HeldOutBenchmark(BenchmarkConfig):
    """A held-out benchmark: evaluated by the operator only, never seen by search."""

    k: int = Field(gt=0, description="Samples per problem.")


class EvaluationConfig(Model):
    """Benchmarks, K per purpose, decoding and prompts."""

    in_loop: InLoopBenchmark = Field(description="In-loop benchmark (online + offline evaluation).")
    held_out: tuple[HeldOutBenchmark, ...] = Field(
        default=(), description="Held-out suite (paper: four benchmarks), for final evaluation only."
    )
    decoding: DecodingConfig = Field(default_factory=DecodingConfig, description="Sampling settings.")
    pass_k: tuple[int, ...] = Field(
        default=(),
        description="Also report unbiased pass@k (Chen et al.) for these k from every evaluation's samples, as "
        "'pass@k' next to the task's metrics, macro-averaged over the held-out suite (seed 001: 1, 8, 64). Every k "
        "must be <= k_offline and every held-out k; an online evaluation with fewer samples reports the k it can.",
    )
    coverage_k: tuple[int, ...] = Field(
        default=(),
        description="Also report coverage@k at each of coverage_thresholds: unbiased pass@k of the samples whose "
        "continuous score (the grader's `score`) reaches the threshold, as 'coverage@k>=t' (seed 001's NCP). "
        "Every benchmark's grader must have a score; the same sample budgets as pass_k apply.",
    )
    coverage_thresholds: tuple[float, ...] = Field(
        default=(), description="The score bars of coverage_k, e.g. [0.05, 0.1, 0.2] (seed 001: 5, 10 and 20 %)."
    )
    system_prompt: str | None = Field(default=None, description="System instruction; None keeps the model default.")
    prompt_template: str = Field(
        default="{problem}", description="User message template; '{problem}' is replaced by the problem text."
    )

    @model_validator(mode="after")
    def _distinct_names(self) -> EvaluationConfig:
        names = [self.in_loop.name] + [b.name for b in self.held_out]
        if len(set(names)) != len(names):
            raise ValueError(f"benchmark names must be distinct (got {names})")
        if "{problem}" not in self.prompt_template:
            raise ValueError(f"prompt_template must contain '{{problem}}' (got {self.prompt_template!r})")
        for key, ks in (("pass_k", self.pass_k), ("coverage_k", self.coverage_k)):
            if any(k < 1 for k in ks) or len(set(ks)) != len(ks):
                raise ValueError(f"{key} must list distinct k >= 1 (got {list(ks)})")
            budgets = [("[evaluation.in_loop].k_offline", self.in_loop.k_offline)]
            budgets += [(f"held-out {b.name!r} k", b.k) for b in self.held_out]
            for where, samples in budgets:
                too_big = [k for k in ks if k > samples]
                if too_big:
                    raise ValueError(
                        f"{key} asks for k = {max(too_big)}, which needs {max(too_big)} samples per problem, but "
                        f"{where} = {samples}; raise it or drop k > {samples} from {key}"
                    )
        if bool(self.coverage_k) != bool(self.coverage_thresholds):
            raise ValueError(
                "coverage_k and coverage_thresholds go together: give both (e.g. coverage_k = [1, 8], "
                "coverage_thresholds = [0.1]) or neither"
            )
        if len(set(self.coverage_thresholds)) != len(self.coverage_thresholds):
            raise ValueError(f"coverage_thresholds must be distinct (got {list(self.coverage_thresholds)})")
        return self


class ResourceConfig(Model):
    """Declared resource policy (paper Appendix D.4)."""

    device: Literal["cpu", "cuda"] = Field(default="cpu", description="Accelerator kind.")
    train_gpus: int = Field(default=0, ge=0, description="GPUs for training per Coordinator.")
    eval_gpus: int = Field(default=0, ge=0, description="GPUs for checkpoint-selection evaluation per Coordinator.")
    cpu_threads: int | None = Field(default=None, gt=0, description="Torch threads on CPU; None = all cores.")

    @model_validator(mode="after")
    def _gpus_need_cuda(self) -> ResourceConfig:
        if self.device == "cpu" and (self.train_gpus or self.eval_gpus):
            raise ValueError("device = 'cpu' cannot request GPUs; set device = 'cuda' or the GPU counts to 0")
        return self


class SeedConfig(Model):
    """Seeds of every random choice fixed by 𝓑."""

    data: int = Field(default=0, description="Pool and split construction.")
    training: int = Field(default=0, description="Training initialization and data order.")
    evaluation: int = Field(default=0, description="Sampling during evaluation.")
    reference: int = Field(default=0, description="The generic reference strategy's draw.")


class JudgeConfig(Model):
    """The Judge service a strategy may await (paper: Judge enrichment), answered by ``ade_core.judging``.

    What decides an answer is here, in 𝓑; where an ``openai`` judge is served and its key are
    operational, read from ``ADE_JUDGE_BASE_URL`` / ``ADE_JUDGE_API_KEY_ENV`` / ``ADE_JUDGE_TIMEOUT_S`` /
    ``ADE_JUDGE_CONCURRENCY`` (see docs/judge.md)."""

    enabled: bool = Field(
        default=False,
        description="Judge enrichment: the judge answers, and admission requires the selector to call it.",
    )
    provider: Literal["offline", "openai"] = Field(
        default="offline",
        description="'offline': rule-based (repetition, format, completeness, a re-derived answer, worked steps); "
        "'openai': an LLM at an OpenAI-compatible endpoint (ADE_JUDGE_BASE_URL), model [judge].model.",
    )
    error_rate: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Offline provider: share of verdicts that err, emulating an imperfect LLM judge (chosen by "
        "ADE): a correctness verdict is flipped, a process verdict moves one level.",
    )
    seed: int = Field(default=0, description="Seed of the offline provider's errors.")
    model: str | None = Field(
        default=None, description="OpenAI provider: the judge model's name at the endpoint (required for 'openai')."
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="OpenAI provider: sampling temperature (paper: 0).")
    max_tokens: int = Field(default=4096, gt=0, description="OpenAI provider: completion token limit (paper: 4,096).")
    attempts: int = Field(
        default=3, ge=1, le=10, description="OpenAI provider: attempts per request before 'unavailable' (paper: 3)."
    )
    enable_thinking: bool | None = Field(
        default=False,
        description="OpenAI provider: sent as chat_template_kwargs.enable_thinking (paper: thinking disabled); "
        "None: not sent, for endpoints that reject the field.",
    )
    max_calls: int = Field(default=64, ge=1, description="Judge calls one strategy run may make (chosen by ADE).")
    max_items_per_call: int = Field(default=4096, ge=1, description="Requests one judge call may carry.")

    @model_validator(mode="after")
    def _model_for_openai(self) -> JudgeConfig:
        if self.provider == "openai" and self.model is None:
            raise ValueError(
                "judge.provider = 'openai' needs judge.model (the model's name at the endpoint, part of 𝓑), "
                "e.g. judge.model = 'Qwen/Qwen3-32B'"
            )
        return self


ResearchMethod = Literal["full", "unified", "independent", "outcome_only", "raw_evidence"]


class ResearchConfig(Model):
    """How the research itself is organized (paper Sec 4.3): an experimental condition, so part of 𝓑."""

    method: ResearchMethod = Field(
        default="full",
        description="'full': ADE's six roles with Plan/Run Memory (the paper's default); 'unified': one session "
        "plans, builds and analyzes, keeping its own notes instead of structured memory; 'independent': each "
        "Plan is developed without the findings, catalog or ranking of the others; 'outcome_only': Coordinator "
        "and Builder only, fed candidate history, scalar scores and execution facts; 'raw_evidence': as "
        "outcome_only, plus the accepted raw Experiment Packages (baseline included) in the Coordinator's view. "
        "See docs/agents.md.",
    )


class StrategyLimits(Model):
    """What one strategy call may use in the sandbox. Part of 𝓑 (digested): the limits decide admission."""

    admission_wall_s: float = Field(
        default=120.0, gt=0, description="Wall (and CPU) seconds per call on the development inputs (admission)."
    )
    realization_wall_s: float = Field(
        default=600.0, gt=0, description="Wall (and CPU) seconds per call on the frozen task inputs (realization)."
    )
    memory_mb: int = Field(default=2048, gt=0, description="Memory of the strategy's process, in MB.")
    output_kb: int = Field(default=1024, gt=0, description="stdout and stderr the strategy may print, each, in KiB.")
    result_mb: int = Field(default=64, gt=0, description="Size of one call's JSON result, in MiB.")

    def sandbox_limits(self, stage: Literal["admission", "realization"]) -> Any:
        """The ade_sandbox Limits of one stage."""
        from ade_sandbox import Limits

        wall = self.admission_wall_s if stage == "admission" else self.realization_wall_s
        return Limits(
            wall_s=wall,
            cpu_s=wall,
            memory_mb=self.memory_mb,
            max_output_bytes=self.output_kb << 10,
            max_result_bytes=self.result_mb << 20,
        )

    def describe(self) -> str:
        return (
            f"{self.admission_wall_s:g} s per call on the development inputs, {self.realization_wall_s:g} s on the "
            f"frozen inputs, {self.memory_mb} MB memory, {self.output_kb} KiB output, {self.result_mb} MiB result"
        )


class SandboxConfig(Model):
    """How strategies run: the limits of each call (the isolation floor is operational)."""

    limits: StrategyLimits = Field(default_factory=StrategyLimits, description="Per-call strategy limits.")


class HackingConfig(Model):
    """Reward Design's reward-hacking probe: responses that game a reward, scored next to correct ones."""

    mode: Literal["refuse", "warn"] = Field(
        default="refuse",
        description="What a reward that pays an exploit as much as a correct response gets: 'refuse' fails its "
        "admission, naming the exploits; 'warn' admits it with a warning naming them. Chosen by ADE (beyond the "
        "paper).",
    )


class ReplayConfig(Model):
    """Reward Design's replay admission: the reward on the generic reference's recorded rollouts."""

    prompt_groups: int = Field(
        default=32,
        ge=1,
        description="Whole prompt groups replayed, from the reference's latest steps back (paper: 32; the tiny "
        "presets: 8, one step).",
    )
    max_records: int = Field(default=256, ge=1, description="Most rollouts replayed (paper: 256).")


class ExperimentConfig(Model):
    """𝓑: everything fixed across the Trials of a Run; its digest is checked at every transition."""

    task: str = Field(pattern=TASK_NAME_PATTERN, description="Task name registered by an installed plugin.")
    name: str = Field(min_length=1, description="Experiment name, used in run ids and reports.")
    model: ModelConfig = Field(description="Target model.")
    data: DataConfig = Field(description="Candidate data.")
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description="Research budget.")
    training: TrainingConfig = Field(description="Training recipe.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Checkpoint rule.")
    evaluation: EvaluationConfig = Field(description="Evaluator.")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="How the Engine generates.")
    resources: ResourceConfig = Field(default_factory=ResourceConfig, description="Resource policy.")
    seeds: SeedConfig = Field(default_factory=SeedConfig, description="Seeds.")
    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="Judge service for selectors.")
    research: ResearchConfig = Field(default_factory=ResearchConfig, description="Research method (Sec 4.3).")
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig, description="Strategy limits in the sandbox.")
    hacking: HackingConfig = Field(
        default_factory=HackingConfig, description="Reward-hacking probe of Reward Design (other tasks ignore it)."
    )
    replay: ReplayConfig = Field(
        default_factory=ReplayConfig, description="Replay admission of Reward Design (other tasks ignore it)."
    )

    @model_validator(mode="after")
    def _checkpoint_rule_fits_paradigm(self) -> ExperimentConfig:
        if self.checkpoint.select == "validation_loss" and self.training.paradigm != "sft":
            raise ValueError(
                "[checkpoint] select = 'validation_loss' scores held-apart SFT examples; GRPO has none: "
                "use select = 'all' (online evaluation picks the checkpoint)"
            )
        return self

    # Sec 3.4: held-out benchmarks never feed search. The held-out suite enters 𝓑's digest only
    # through its own digest, so a search-side copy without it (``for_search``) — what an Engine
    # job carries — still proves which 𝓑 it belongs to.

    def held_out_digest(self) -> Digest:
        """Digest of the held-out suite alone (``[[evaluation.held_out]]``)."""
        return sha256_digest([bench.model_dump(mode="json") for bench in self.evaluation.held_out])

    def digest_body(self, held_out_digest: Digest | None = None) -> dict[str, Any]:
        """What 𝓑's digest covers: the whole config, the held-out suite as ``held_out_digest`` (default: its
        own digest), and the ``OMITTED_AT_DEFAULT`` keys only where they differ from their default."""
        body = self.model_dump(mode="json")
        body["evaluation"]["held_out"] = held_out_digest or self.held_out_digest()
        defaults = _default_values()
        for dotted in OMITTED_AT_DEFAULT:
            *parents, leaf = dotted.split(".")
            section: Any = body
            for key in parents:
                section = section.get(key) if isinstance(section, dict) else None
            if isinstance(section, dict) and section.get(leaf, None) == defaults[dotted]:
                del section[leaf]
        return body

    def digest(self, held_out_digest: Digest | None = None) -> Digest:
        """𝓑's digest, with the held-out suite represented by ``held_out_digest`` (default: its own)."""
        return sha256_digest(self.digest_body(held_out_digest))

    def for_search(self) -> ExperimentConfig:
        """This 𝓑 without its held-out benchmarks: what the search side (Engine jobs) may carry."""
        return self.model_copy(update={"evaluation": self.evaluation.model_copy(update={"held_out": ()})})


# Keys that enter 𝓑's digest only when set to something other than their default: a stored Run whose
# frozen 𝓑 has no such key digests as it did when it was frozen, so it still verifies and resumes.
OMITTED_AT_DEFAULT = (
    "engine",
    "training.grpo.vllm_mode",
    "training.sft.lora",
    "checkpoint.select",
    "checkpoint.validation_fraction",
    "evaluation.pass_k",
    "evaluation.coverage_k",
    "evaluation.coverage_thresholds",
)


def _default_values() -> dict[str, Any]:
    """The JSON value of each ``OMITTED_AT_DEFAULT`` key when it is left unset."""
    return {
        "engine": EngineConfig().model_dump(mode="json"),
        "training.grpo.vllm_mode": GRPORecipe.model_fields["vllm_mode"].default,
        "training.sft.lora": None,
        "checkpoint.select": CheckpointConfig.model_fields["select"].default,
        "checkpoint.validation_fraction": CheckpointConfig.model_fields["validation_fraction"].default,
        "evaluation.pass_k": [],
        "evaluation.coverage_k": [],
        "evaluation.coverage_thresholds": [],
    }
