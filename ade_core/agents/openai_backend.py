"""The ``openai`` backend: any OpenAI-compatible chat-completions endpoint answers a role.

One call = up to ``attempts`` deliveries. Each request asks for structured output (a JSON-schema
``response_format``); an endpoint whose error names that ``response_format`` (whatever its status:
llama-cpp-python answers 500) is remembered and asked one step down from then on: a ``json_object``
constrained by the same schema (what llama-cpp-python serves), then JSON in plain text (the schema
is in the prompt either way); an unrelated 400, such as a prompt over the context, changes nothing.
A reply that is not a valid delivery goes back to the model with its prior reply and targeted
feedback; when the attempts are spent the call raises ``DeliveryInvalid``, and an endpoint that
stays unreachable raises ``AgentUnavailable`` — both ``AgentError``s, which the Harness records
and retries within its own call budget.

Requests are blocking (the sync ``openai`` client): in a real run they go to a thread pool of
``max_concurrency`` workers per role; in a dry run they block the virtual-time loop, which must
never see real I/O in flight (its clock would jump past it).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import openai

from ade_core.agents.contract import DeliveryInvalid, Refusal, envelope_schema, read_reply
from ade_core.agents.fitting import Trimmed, fit_view
from ade_core.agents.prompting import Message, render_messages, repair_messages
from ade_core.harness.roles import AgentError, AgentReply
from ade_core.judging.openai_provider import LOCAL_SERVER_KEY
from ade_core.schemas.config import AgentEndpoint
from ade_core.schemas.views import View

MAX_BACKOFF_S = 60.0
_RETRYABLE = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.APIResponseValidationError,
    json.JSONDecodeError,  # a 200 whose body was cut off
)
# What a server's error says when it is the JSON-schema response_format it cannot serve (llama.cpp's
# server and llama-cpp-python answer it with a 500 naming json_schema; others with a 400 or 422).
_STRUCTURED_OUTPUT_WORDS = (
    "response_format", "json_schema", "json_object", "structured output", "guided_json", "grammar",
)  # fmt: skip
# How a reply is asked for, best first: a JSON-schema response_format, a JSON object constrained by the
# schema (llama-cpp-python's form), JSON in plain text.
OUTPUT_MODES = ("json_schema", "json_object", "text")


# Completion limits of a role whose endpoint sets no max_tokens (chosen by ADE from the replies' sizes: a
# Builder writes a whole strategy; the other roles write short structured deliveries).
ROLE_MAX_TOKENS = {"builder": 16384, "analyzer": 8192}
DEFAULT_MAX_TOKENS = 4096
MIN_REPLY_TOKENS = 256  # a prompt that leaves less than this of the context is refused, not sent
MIN_QUOTED_CHARS = 200  # a repair turn quotes at least this much of the reply it refuses
NOTE_TOKENS = 100  # room kept for the sentence that says what a shortened view left out
CHARS_PER_TOKEN = 3.0  # the estimate without a tokenizer: errs high for English and JSON


def rejects_structured_output(exc: openai.APIStatusError) -> bool:
    """Whether an error refuses the JSON-schema ``response_format`` itself, rather than the prompt (a context
    overflow is a 400 too), the key or the model: only then is asking in plain text the fix."""
    if exc.status_code not in (400, 422, 500, 501):
        return False
    said = f"{exc.message} {json.dumps(exc.body, default=str) if exc.body is not None else ''}".lower()
    return any(word in said for word in _STRUCTURED_OUTPUT_WORDS)


class AgentUnavailable(AgentError):
    """The endpoint gave no usable answer (unreachable, refusing, or failing past the retries)."""


class PromptTooLong(AgentUnavailable):
    """A role's prompt does not fit the endpoint's context with room for a reply; nothing was sent."""


def _limit(endpoint: AgentEndpoint, role: str) -> int:
    """The role's completion limit: its endpoint's ``max_tokens``, else the role's default."""
    return endpoint.max_tokens or ROLE_MAX_TOKENS.get(role, DEFAULT_MAX_TOKENS)


def _where(endpoint: AgentEndpoint) -> str:
    return endpoint.base_url or "the openai client's default endpoint"


class OpenAIBackend:
    """Answers the roles in ``endpoints`` through their OpenAI-compatible endpoints."""

    def __init__(
        self,
        endpoints: Mapping[str, AgentEndpoint],
        additions: Mapping[str, Sequence[str]] | None = None,
        *,
        blocking: bool = False,
    ):
        self.endpoints = dict(endpoints)
        self.additions = {role: tuple(texts) for role, texts in (additions or {}).items()}
        self.blocking = blocking
        self._lock = threading.Lock()
        self._clients: dict[tuple[Any, ...], openai.OpenAI] = {}
        self._models: dict[str, str] = {}
        self._step: dict[str, int] = {}  # 'auto' endpoints: how far down OUTPUT_MODES their refusals moved them
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._tokenizers: dict[str, Any] = {}

    async def deliver(self, role: str, view: View) -> AgentReply:
        if role not in self.endpoints:
            raise AgentUnavailable(f"no [agents] endpoint is configured for role {role!r}")
        if self.blocking:
            return self.call(role, view)
        with self._lock:
            pool = self._pools.get(role)
            if pool is None:
                workers = self.endpoints[role].max_concurrency
                pool = self._pools[role] = ThreadPoolExecutor(workers, thread_name_prefix=f"ade-{role}")
        return await asyncio.get_running_loop().run_in_executor(pool, self.call, role, view)

    def call(self, role: str, view: View) -> AgentReply:
        """One role call: request, read, and repair until a valid delivery or ``attempts`` are spent."""
        endpoint = self.endpoints[role]
        started, used = time.monotonic(), Usage()
        messages, trimmed = self._fitted(endpoint, view)
        feedback: list[str] = []
        switched: list[dict[str, Any]] = []  # endpoints this call moved down an output mode
        try:
            for _ in range(endpoint.attempts):
                text, truncated, usage = self._complete(endpoint, view, messages, switched)
                used = used + usage
                result = read_reply(text, view, truncated=truncated)
                if not isinstance(result, Refusal):
                    return AgentReply(
                        delivery=result,
                        seconds=round(time.monotonic() - started, 3),
                        output_mode=self.output_mode(role),
                        downgrades=tuple(switched),
                        view_trimmed=trimmed.to_json() if trimmed else None,
                        **used.cost(),
                    )
                feedback = result.feedback
                messages = self._repair(endpoint, view.role, messages, text, feedback)
        except AgentError as exc:
            exc.downgrades = tuple(switched)
            exc.seconds = round(time.monotonic() - started, 3)
            exc.tokens, exc.prompt_tokens, exc.completion_tokens = (
                exc.tokens + used.total,
                exc.prompt_tokens + used.prompt,
                exc.completion_tokens + used.completion,
            )
            raise
        invalid = DeliveryInvalid(
            f"{role} gave no valid delivery in {endpoint.attempts} attempt(s): {'; '.join(feedback)}",
            feedback,
            seconds=round(time.monotonic() - started, 3),
            **used.cost(),
        )
        invalid.downgrades = tuple(switched)
        raise invalid

    # -- transport -----------------------------------------------------------------------------

    def _client(self, endpoint: AgentEndpoint) -> openai.OpenAI:
        key = os.environ.get(endpoint.api_key_env)
        if not key and endpoint.base_url is None:
            raise AgentUnavailable(
                f"${endpoint.api_key_env} is not set; export your API key there, or point agents.base_url "
                "at a local server"
            )
        ident = (endpoint.base_url, endpoint.api_key_env, endpoint.timeout_s)
        with self._lock:
            client = self._clients.get(ident)
            if client is None:
                client = self._clients[ident] = openai.OpenAI(
                    base_url=endpoint.base_url,
                    api_key=key or LOCAL_SERVER_KEY,
                    timeout=endpoint.timeout_s,
                    max_retries=0,  # retries are ours: bounded, with backoff, and counted
                )
        return client

    def _model(self, endpoint: AgentEndpoint, client: openai.OpenAI) -> str:
        if endpoint.model:
            return endpoint.model
        where = _where(endpoint)
        with self._lock:
            if where in self._models:
                return self._models[where]
        try:
            served = sorted(m.id for m in client.models.list())
        except openai.OpenAIError as exc:
            raise AgentUnavailable(f"could not list the models at {where} ({exc}); set agents.model") from None
        if len(served) != 1:
            shown = ", ".join(served[:8]) or "none"
            raise AgentUnavailable(f"{where} serves {len(served)} models ({shown}); choose one with agents.model")
        with self._lock:
            self._models[where] = served[0]
        return served[0]

    def _complete(
        self, endpoint: AgentEndpoint, view: View, messages: list[Message], switched: list[dict[str, Any]]
    ) -> tuple[str, bool, Usage]:
        """One completion with bounded retries: (text, truncated, tokens reported); an endpoint this
        request moves down an output mode is added to ``switched``."""
        client = self._client(endpoint)
        request: dict[str, Any] = {"model": self._model(endpoint, client), "messages": messages}
        if endpoint.temperature is not None:
            request["temperature"] = endpoint.temperature
        request["max_tokens"] = self._reply_room(endpoint, view.role, messages)
        if endpoint.reasoning_effort is not None:
            request["reasoning_effort"] = endpoint.reasoning_effort
        where = _where(endpoint)
        retry = 0
        while True:
            mode = self._mode(endpoint)
            if mode == "json_schema":
                request["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": f"ade_{view.role}_reply", "schema": envelope_schema(view), "strict": False},
                }
            elif mode == "json_object":
                request["response_format"] = {"type": "json_object", "schema": envelope_schema(view)}
            else:
                request.pop("response_format", None)
            try:
                try:
                    if endpoint.stream:
                        return self._streamed(client, request, endpoint.timeout_s)
                    completion = client.chat.completions.create(**request)
                except openai.APIStatusError as exc:
                    if mode != "text" and endpoint.response_format == "auto" and rejects_structured_output(exc):
                        switched.extend(self._downgrade(where, mode, exc))
                        continue
                    raise
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                raise AgentUnavailable(f"{where} refused the request ({exc.status_code}): {exc.message}") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise AgentUnavailable(
                    f"{where} refused the API key ({exc.status_code}); put a valid key in ${endpoint.api_key_env}"
                ) from None
            except openai.NotFoundError:
                raise AgentUnavailable(
                    f"{where} has no chat-completions route or model {request['model']!r} (404); check that "
                    "agents.base_url includes the API prefix (e.g. http://host:8000/v1) and agents.model"
                ) from None
            except _RETRYABLE as exc:
                if retry >= endpoint.max_retries:
                    raise AgentUnavailable(
                        f"{where} failed {retry + 1} time(s), last: {type(exc).__name__}: {exc}; check the "
                        "server, or raise agents.timeout_s / agents.max_retries"
                    ) from None
                time.sleep(self._delay(endpoint, retry, exc))
                retry += 1
                continue
            except openai.APIStatusError as exc:
                raise AgentUnavailable(f"{where} answered {exc.status_code}: {exc.message}") from None
            return self._read(completion)

    def _fitted(self, endpoint: AgentEndpoint, view: View) -> tuple[list[Message], Trimmed]:
        """The call's first messages; with ``context_tokens`` set, the view's evidence shortened until the prompt
        leaves the reply its room (the role's limit, at most a quarter of the context), and what was cut."""
        additions = self.additions.get(view.role, ())
        messages = render_messages(view, additions)
        if endpoint.context_tokens is None:
            return messages, Trimmed()
        shown, trimmed = fit_view(
            view.role,
            view.model_dump(mode="json"),
            lambda data: self._prompt_tokens(endpoint, render_messages(view, additions, data)),
            self._prompt_budget(endpoint, view.role) - NOTE_TOKENS,
        )
        return (render_messages(view, additions, shown, trimmed.note()) if trimmed else messages), trimmed

    def _prompt_budget(self, endpoint: AgentEndpoint, role: str) -> int:
        """The prompt tokens that leave the reply its room: the role's limit, at most a quarter of the context."""
        assert endpoint.context_tokens is not None
        return endpoint.context_tokens - min(
            _limit(endpoint, role), max(MIN_REPLY_TOKENS, endpoint.context_tokens // 4)
        )

    def _repair(
        self, endpoint: AgentEndpoint, role: str, messages: list[Message], prior: str, feedback: Sequence[str]
    ) -> list[Message]:
        """The repair turn; with ``context_tokens`` set, the prior reply quoted back is cut (its start kept) until
        the prompt fits, so a long invalid reply does not push the repair out of the context."""
        repaired = repair_messages(messages, prior, feedback)
        if endpoint.context_tokens is None:
            return repaired
        budget, keep = self._prompt_budget(endpoint, role), len(prior)
        while keep > MIN_QUOTED_CHARS and self._prompt_tokens(endpoint, repaired) > budget:
            keep //= 2
            quoted = prior[:keep] + f" …[{len(prior) - keep} characters of this reply cut to fit the context]"
            repaired = repair_messages(messages, quoted, feedback)
        return repaired

    def _reply_room(self, endpoint: AgentEndpoint, role: str, messages: list[Message]) -> int:
        """The completion limit to send: the role's ``max_tokens`` (or its default), lowered to what the context
        leaves after the prompt; a prompt that leaves less than a short reply is refused before it is sent."""
        limit = _limit(endpoint, role)
        if endpoint.context_tokens is None:
            return limit
        prompt = self._prompt_tokens(endpoint, messages)
        room = endpoint.context_tokens - prompt
        if room < MIN_REPLY_TOKENS:
            how = "measured with agents.tokenizer" if endpoint.tokenizer else "estimated at 3 characters a token"
            raise PromptTooLong(
                f"{role}'s prompt is {prompt} tokens ({how}), leaving {max(room, 0)} of the {endpoint.context_tokens}-"
                f"token context (agents.context_tokens) for the reply; serve a model with a larger context and raise "
                "context_tokens (docs/agents.md lists each role's prompt size)"
            )
        return min(limit, room)

    def _prompt_tokens(self, endpoint: AgentEndpoint, messages: list[Message]) -> int:
        """The prompt's tokens by the endpoint's tokenizer (with its chat template), else an estimate."""
        if endpoint.tokenizer is None:
            return int(sum(len(m["content"]) + 8 for m in messages) / CHARS_PER_TOKEN) + 1
        tokenizer = self._tokenizer(endpoint.tokenizer)
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        else:
            text = "\n".join(m["content"] for m in messages)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def _tokenizer(self, path: str) -> Any:
        with self._lock:
            if path not in self._tokenizers:
                from transformers import AutoTokenizer  # only an endpoint that names a tokenizer needs it

                try:
                    self._tokenizers[path] = AutoTokenizer.from_pretrained(path)
                except (OSError, ValueError) as exc:
                    raise AgentUnavailable(
                        f"agents.tokenizer {path!r} could not be loaded ({exc}); give a local tokenizer directory "
                        "or unset it to estimate prompt sizes"
                    ) from None
            return self._tokenizers[path]

    def _downgrade(self, where: str, refused: str, exc: openai.APIStatusError) -> list[dict[str, Any]]:
        """Ask ``where`` one output mode below ``refused`` from now on; the switch and why, unless another
        call already moved it."""
        with self._lock:
            step = OUTPUT_MODES.index(refused) + 1
            if self._step.get(where, 0) >= step:
                return []
            self._step[where] = step
        said = str(exc.message).split('  File "')[0]  # a server's traceback is not a reason
        reason = " ".join(said.split())[:300]
        return [{"endpoint": where, "status": exc.status_code, "reason": reason, "mode": OUTPUT_MODES[step]}]

    def _mode(self, endpoint: AgentEndpoint) -> str:
        if endpoint.response_format != "auto":
            return endpoint.response_format
        with self._lock:
            return OUTPUT_MODES[self._step.get(_where(endpoint), 0)]

    def output_mode(self, role: str) -> str:
        """How ``role``'s endpoint is asked for its reply now: 'json_schema', 'json_object' or 'text'."""
        return self._mode(self.endpoints[role])

    @staticmethod
    def _delay(endpoint: AgentEndpoint, retry: int, exc: Exception) -> float:
        delay = endpoint.backoff_s * 2**retry
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                delay = max(delay, float(response.headers.get("retry-after", 0)))
            except ValueError:
                pass
        return min(delay, MAX_BACKOFF_S)

    @staticmethod
    def _streamed(client: openai.OpenAI, request: dict[str, Any], timeout_s: float) -> tuple[str, bool, Usage]:
        """One streamed completion read whole within ``timeout_s``; past it the stream is closed (so the server
        stops generating) and the request fails as a timeout."""
        deadline = time.monotonic() + timeout_s
        parts: list[str] = []
        finish, tokens = None, Usage()
        with client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        ) as stream:  # leaving the block closes the connection, whatever happened
            for chunk in stream:
                if chunk.usage is not None:
                    tokens = _usage(chunk.usage)
                for choice in chunk.choices[:1]:
                    parts.append(choice.delta.content or "")
                    finish = choice.finish_reason or finish
                if time.monotonic() > deadline:
                    raise openai.APITimeoutError(request=stream.response.request)
        return "".join(parts), finish == "length", tokens

    @staticmethod
    def _read(completion: Any) -> tuple[str, bool, Usage]:
        usage = getattr(completion, "usage", None)
        tokens = _usage(usage) if usage is not None else Usage()
        if not completion.choices:
            return "", False, tokens
        choice = completion.choices[0]
        return choice.message.content or "", choice.finish_reason == "length", tokens


@dataclass(frozen=True)
class Usage:
    """Tokens a server reported for one or more requests (zero where it reports none)."""

    prompt: int = 0
    completion: int = 0
    total: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt + other.prompt, self.completion + other.completion, self.total + other.total)

    def cost(self) -> dict[str, int]:
        """As the keyword arguments of ``AgentReply`` and ``AgentError``."""
        return {"tokens": self.total, "prompt_tokens": self.prompt, "completion_tokens": self.completion}


def _usage(reported: Any) -> Usage:
    """A server's ``usage`` object (of a completion or a stream's last chunk) as ``Usage``."""
    prompt, completed = reported.prompt_tokens or 0, reported.completion_tokens or 0
    return Usage(prompt, completed, reported.total_tokens or prompt + completed)
