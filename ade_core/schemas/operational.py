"""The operational settings: how a Run is carried out (agents, review, sandbox, executor, recovery,
reporting). They may change between resumes without changing the science, so they are not part
of 𝓑 and not digested.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, create_model, model_validator

from ade_core.schemas.common import Model
from ade_core.specs import Role

ISOLATION_LEVELS = ("process", "process+lsm", "namespaces", "strict")  # as ade_sandbox.LEVELS


class AgentEndpoint(Model):
    """How one research role reaches its model: backend, endpoint, decoding and call limits."""

    backend: Literal["offline", "openai"] = Field(
        default="offline",
        description="'offline': ADE's deterministic research policy (no network); "
        "'openai': any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, Ollama).",
    )
    base_url: str | None = Field(
        default=None,
        description="API root of the endpoint including its prefix, e.g. 'http://127.0.0.1:8000/v1' "
        "(None: the openai client's default, api.openai.com or $OPENAI_BASE_URL).",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Environment variable holding the API key (unset: refused for the default endpoint; a local "
        "server named by base_url gets the fixed key 'not-needed', which such servers ignore).",
    )
    model: str | None = Field(
        default=None,
        description="Model name at the endpoint (None: the endpoint's only model, read from GET /models).",
    )
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = Field(
        default=None,
        description="Reasoning effort sent to reasoning models (None: not sent; the paper's agents used 'xhigh').",
    )
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature (None: not sent).")
    max_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Completion token limit (None: the role's default, chosen by ADE: builder 16384, analyzer 8192, "
        "others 4096; docs/agents.md).",
    )
    context_tokens: int | None = Field(
        default=None,
        gt=0,
        description="The model's context window in tokens (None: not checked). With it, a prompt with no room left "
        "for a reply is refused before it is sent, and max_tokens is lowered to the room the prompt leaves.",
    )
    tokenizer: str | None = Field(
        default=None,
        description="A local tokenizer directory (Hugging Face format) that measures prompts for context_tokens "
        "(None: estimated as characters / 3, which errs high for English and JSON; chosen by ADE).",
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Seconds one request may take (chosen by ADE).")
    stream: bool = Field(
        default=False,
        description="Read replies as a stream: a request past timeout_s is closed mid-reply, which stops servers "
        "that keep generating an abandoned non-streamed request (llama-cpp-python). Tokens are counted only if the "
        "server reports usage in the stream.",
    )
    max_concurrency: int = Field(default=8, ge=1, description="Requests of one role in flight at once (chosen by ADE).")
    attempts: int = Field(
        default=3,
        ge=1,
        description="Deliveries per call: an invalid one goes back with targeted feedback (paper App. C.9: 3).",
    )
    max_retries: int = Field(
        default=4, ge=0, description="Retries of one request after 429, 5xx, timeouts or lost connections."
    )
    backoff_s: float = Field(
        default=2.0, ge=0, description="First retry delay in seconds, doubled per retry, at most 60 (chosen by ADE)."
    )
    response_format: Literal["auto", "json_schema", "json_object", "text"] = Field(
        default="auto",
        description="'json_schema': structured output; 'json_object': a JSON object constrained by the reply "
        "schema (llama-cpp-python); 'text': JSON parsed from the reply; 'auto': json_schema, then json_object, "
        "then text, each step taken when the server refuses the one before.",
    )


def _optional(model: type[Model], name: str, doc: str) -> type[Model]:
    """``model`` with every field optional and unset by default: a table of overrides."""
    fields: dict[str, Any] = {}
    for key, field in model.model_fields.items():
        assert field.annotation is not None  # every schema field is annotated
        unset = Field(default=None, description=f"{field.description} (unset: inherited)")
        fields[key] = (field.annotation | None, unset)
    return create_model(name, __base__=Model, __doc__=doc, __module__=__name__, **fields)


RoleAgentSettings = _optional(
    AgentEndpoint, "RoleAgentSettings", "Per-role overrides of [operational.agents] (`[agents.roles.<role>]`)."
)


class ReviewSettings(Model):
    """The Review provider: the Review Worker's model (the paper uses a local open model for it)."""

    backend: Literal["offline", "openai"] | None = Field(
        default=None, description="Review backend (None: the [agents] backend)."
    )
    endpoint: str | None = Field(default=None, description="API root of the review endpoint (None: agents.base_url).")
    api_key_env: str | None = Field(default=None, description="Environment variable of its key (None: as agents).")
    model: str | None = Field(
        default=None,
        description="Review model (None: agents.model, or with its own endpoint that endpoint's only model).",
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature (paper: 0).")
    max_tokens: int | None = Field(default=4096, gt=0, description="Completion token limit (paper: 4,096).")
    timeout_s: float | None = Field(default=None, gt=0, description="Seconds per request (None: agents.timeout_s).")
    concurrency: int = Field(default=128, ge=1, description="Review requests in flight at once (paper: 128).")
    attempts: int = Field(default=3, ge=1, description="Deliveries per review call (paper: 3).")


class AgentSettings(AgentEndpoint):
    """Which backend and model answer the research roles (`[agents]`; per role: `[agents.roles.<role>]`)."""

    roles: dict[Role, RoleAgentSettings] = Field(  # type: ignore[valid-type]  # a create_model class: mypy sees a variable
        default_factory=dict,
        description="Per-role overrides; the Review Worker is configured under [review] instead.",
    )

    @model_validator(mode="after")
    def _review_worker_under_review(self) -> AgentSettings:
        if "review_worker" in self.roles:
            raise ValueError(
                "the Review Worker is configured under [review] (endpoint, model, concurrency, attempts), "
                "not [agents.roles.review_worker]; move those keys there"
            )
        return self

    def for_role(self, role: str, review: ReviewSettings | None = None) -> AgentEndpoint:
        """The settings ``role`` uses: [agents], then [review] (Review Worker) or [agents.roles.<role>]."""
        base = self.model_dump(exclude={"roles"})
        if role == "review_worker":
            review = review or ReviewSettings()
            renamed = {
                "backend": review.backend,
                "base_url": review.endpoint,
                "api_key_env": review.api_key_env,
                "model": review.model,
                "timeout_s": review.timeout_s,
            }
            if review.endpoint is not None and review.model is None:
                base["model"] = None  # another server: its own model, not the research agents'
            base.update({k: v for k, v in renamed.items() if v is not None})
            base.update(
                temperature=review.temperature,
                max_tokens=review.max_tokens,
                max_concurrency=review.concurrency,
                attempts=review.attempts,
            )
        elif role in self.roles:
            base.update(self.roles[role].model_dump(exclude_none=True))  # type: ignore[attr-defined]  # a create_model class: mypy sees a variable
        return AgentEndpoint.model_validate(base)


class SandboxSettings(Model):
    """Minimum isolation the sandbox must reach before it runs a strategy."""

    min_isolation: Literal["process", "process+lsm", "namespaces", "strict"] = Field(
        default="process+lsm",
        description=f"Weakest level a strategy may run at, one of {', '.join(ISOLATION_LEVELS)} (weakest first); "
        "below it runs are refused. `ade sandbox doctor` shows what this machine reaches.",
    )


class GenerationSettings(Model):
    """Where the Engine's generation servers are (`[operational.generation]`): a host, a key or a timeout
    changes no score, so none of it is part of 𝓑 (which picks the backend, [engine.generation])."""

    base_url: str | None = Field(
        default=None,
        description="API root of the OpenAI-compatible server for [engine.generation].backend = 'openai', "
        "including its prefix, e.g. 'http://127.0.0.1:8000/v1'; required for that backend.",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Environment variable holding the server's API key (unset: the fixed key 'not-needed', which "
        "local servers ignore).",
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Seconds one request may take (chosen by ADE).")
    max_concurrency: int = Field(
        default=8, ge=1, description="Requests in flight at once, one per problem (chosen by ADE)."
    )
    max_retries: int = Field(
        default=3, ge=0, description="Retries of one request after 429, 5xx, timeouts or lost connections."
    )
    vllm_server_url: str | None = Field(
        default=None,
        description="Where `trl vllm-serve` listens for [training.grpo].vllm_mode = 'server', e.g. "
        "'http://10.0.0.2:8000' (None: TRL's default, port 8000 on this host).",
    )

    @model_validator(mode="after")
    def _http_urls(self) -> GenerationSettings:
        for key in ("base_url", "vllm_server_url"):
            value = getattr(self, key)
            if value is not None and not value.startswith(("http://", "https://")):
                raise ValueError(f"{key} must be an http(s) URL such as http://127.0.0.1:8000/v1 (got {value!r})")
        return self


class ExecutorSettings(Model):
    """Where Engine requests run: Trial attempts, the base and reference evaluations, held-out evaluations."""

    kind: Literal["local", "ray"] = Field(
        default="local",
        description="Executor kind. 'local': subprocesses on this machine's cores and GPUs; 'ray': tasks on an "
        "existing Ray cluster (docs/scale-out.md). Dry runs always use the simulated Engine.",
    )
    address: str = Field(
        default="auto",
        description="kind = 'ray': the cluster to join ('auto': the one this machine belongs to, or a "
        "'host:port' / 'ray://host:port' address).",
    )
    pending_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="kind = 'ray': a task that has not started after this long is cancelled as 'unscheduled' "
        "(retryable), so a request no node can take does not wait forever.",
    )
    slots: int | None = Field(
        default=None,
        ge=1,
        description="At most this many concurrent Engine requests; None: as many as the resources allow (on a "
        "local executor, cores / cpu_threads attempts on CPU and visible GPUs / GPUs per attempt on CUDA; held-out "
        "evaluations take one core each).",
    )
    stall_after_s: float = Field(
        default=120.0,
        gt=0,
        description="An attempt whose heartbeat makes no progress for this long is killed as stalled (retryable).",
    )
    custom: dict[str, float] = Field(
        default_factory=dict,
        description="Custom resources this executor offers (name -> amount), for requests that declare them.",
    )


class RecoverySettings(Model):
    """What the Harness does when a Trial's Engine recovery budget ([budget].engine_attempts) is spent."""

    on_exhausted: Literal["fail_trial", "suspend_run"] = Field(
        default="fail_trial",
        description="'fail_trial': the Trial ends engine_failed and its Plan slot is consumed (paper App. C.10); "
        "'suspend_run': the Run is suspended with the Trial where it is, and `ade resume` grants that Trial a "
        "fresh recovery budget (for faults the operator can fix, e.g. a broken node).",
    )


class ReportSettings(Model):
    """What the operator tier adds for the end-of-run report (never read by search)."""

    heldout_final: bool = Field(
        default=True,
        description="When search completes, `ade run` evaluates the frozen final selection on the held-out "
        "benchmarks (what `ade heldout RUN` does; paper Sec 3.4). Off: the operator runs `ade heldout` later.",
    )
    heldout_per_trial: bool = Field(
        default=False,
        description="After final selection, also evaluate every Trial's selected checkpoint on the held-out "
        "benchmarks (operator-only store) so the report can plot the held-out score of the best-so-far over "
        "time (paper Fig. 3). Costs one held-out evaluation per Trial; chosen by ADE (off by default).",
    )


class OperationalSettings(Model):
    """Settings that may change between resumes without changing the science; not digested."""

    run_dir: str = Field(default="runs", description="Directory holding run stores.")
    agents: AgentSettings = Field(
        default_factory=AgentSettings, description="Agent backends and models (also written `[agents]`)."
    )
    review: ReviewSettings = Field(
        default_factory=ReviewSettings, description="Review provider (also written `[review]`)."
    )
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings, description="Sandbox policy.")
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings, description="Executor.")
    generation: GenerationSettings = Field(
        default_factory=GenerationSettings, description="Where the Engine's generation servers are."
    )
    recovery: RecoverySettings = Field(default_factory=RecoverySettings, description="Recovery policy.")
    report: ReportSettings = Field(default_factory=ReportSettings, description="End-of-run report.")
