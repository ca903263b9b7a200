"""Generation backends: HF on the tiny model, the OpenAI-compatible client against a real local server, vLLM args."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from generation_server import OpenAIServer

from ade_core.engine.generation import GenerationError, Generator, Sample, SamplingParams, make_generator
from ade_core.engine.generation.hf import HFGenerator, decode_completion
from ade_core.engine.generation.openai_compat import GenerationServerError, OpenAIGenerator
from ade_core.engine.generation.vllm import VLLMGenerator, vllm_engine_args, vllm_sampling_args
from ade_core.engine.grading.math import MissingDependencyError
from ade_core.engine.tiny_lm import build_tiny_lm
from ade_core.schemas.config import DecodingConfig

CONVERSATIONS = [
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2 + 2? " * 6}],
    [{"role": "user", "content": "hi"}],
    [{"role": "user", "content": "Name a prime number between 10 and 20."}],
    [{"role": "user", "content": "ok?"}],
]
SAMPLED = SamplingParams(temperature=0.6, top_p=0.95, max_new_tokens=12, k=3, seed=7)
GREEDY = SamplingParams(temperature=0.0, top_p=0.95, max_new_tokens=8, k=3, seed=7)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(scope="module")
def think_path(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with <think>/</think> added as special tokens, rigged to emit only <think> or eos.

    Its final layer norm outputs a constant vector, so every step draws <think> (p ~ 0.44) or
    eos (p ~ 0.56) and greedy decoding stops at once: responses are "<think>" * (n - 1) + eos.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_path)
    tokenizer.add_tokens(["<think>", "</think>"], special_tokens=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    model.resize_token_embeddings(len(tokenizer))
    think, eos = tokenizer.convert_tokens_to_ids("<think>"), tokenizer.eos_token_id
    with torch.no_grad():
        embeddings = model.get_input_embeddings().weight  # tied to the LM head
        embeddings[think].zero_()
        embeddings[think, 0] = 5.0
        embeddings[eos].zero_()
        embeddings[eos, 1] = 5.05
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(embeddings[think] + embeddings[eos])
    directory = tmp_path_factory.mktemp("think-lm")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def short_path(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model cut to a 48-token context, so running out of context is cheap to reach."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    positions = torch.nn.Embedding(48, model.config.n_embd)
    with torch.no_grad():
        positions.weight.copy_(model.transformer.wpe.weight[:48])
    model.transformer.wpe = positions
    model.config.n_positions = 48
    directory = tmp_path_factory.mktemp("short-lm")
    model.save_pretrained(directory)
    AutoTokenizer.from_pretrained(tiny_path).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def hf(tiny_path: Path) -> HFGenerator:
    # batch_sequences 2 (greedy: 2 prompts) with 4 conversations: two batches, and length sorting reorders them.
    return HFGenerator(tiny_path, batch_sequences=2)


@pytest.fixture(scope="module")
def think_hf(think_path: Path) -> HFGenerator:
    return HFGenerator(think_path, batch_sequences=4)


def test_hf_returns_k_samples_per_conversation_in_input_order(hf: HFGenerator) -> None:
    batched = hf.generate(CONVERSATIONS, GREEDY)
    assert [len(samples) for samples in batched] == [GREEDY.k] * len(CONVERSATIONS)
    # Greedy output does not depend on batching, so each conversation alone must match its slot.
    alone = [hf.generate([conversation], GREEDY)[0] for conversation in CONVERSATIONS]
    assert batched == alone
    assert len({samples[0].text for samples in batched}) == len(CONVERSATIONS)


def test_hf_batches_count_sequences_not_prompts(tiny_path: Path) -> None:
    generator = HFGenerator(tiny_path, batch_sequences=6)
    sizes: list[int] = []
    generate_batch = generator._generate_batch

    def spy(batch: list[list[int]], params: SamplingParams, index: int) -> list[list[Sample]]:
        sizes.append(len(batch))
        return generate_batch(batch, params, index)

    generator._generate_batch = spy  # type: ignore[method-assign]
    generator.generate(CONVERSATIONS, SAMPLED)  # k=3: two prompts (six sequences) per batch
    generator.generate(CONVERSATIONS, SamplingParams(0.6, 0.95, 4, k=1, seed=0))  # k=1: all four at once
    generator.generate(CONVERSATIONS, SamplingParams(0.6, 0.95, 4, k=8, seed=0))  # k > batch: one prompt each
    generator.close()
    assert sizes == [2, 2, 4, 1, 1, 1, 1]


def test_hf_same_seed_same_samples_other_seed_other_samples(hf: HFGenerator) -> None:
    first = hf.generate(CONVERSATIONS, SAMPLED)
    assert hf.generate(CONVERSATIONS, SAMPLED) == first
    other = hf.generate(CONVERSATIONS, SamplingParams(0.6, 0.95, 12, 3, seed=8))
    assert other != first
    texts = [sample.text for samples in first for sample in samples]
    assert len(set(texts)) == len(texts), "k samples of one prompt should differ when sampling"


def test_hf_temperature_zero_gives_k_identical_samples(hf: HFGenerator) -> None:
    results = hf.generate(CONVERSATIONS, GREEDY)
    for samples in results:
        assert len(set(samples)) == 1
    assert hf.generate(CONVERSATIONS, SamplingParams(0.0, 0.95, 8, 3, seed=99)) == results


def test_hf_respects_max_new_tokens(hf: HFGenerator) -> None:
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=5, k=4, seed=1)
    samples = [sample for group in hf.generate(CONVERSATIONS, params) for sample in group]
    assert all(1 <= sample.num_tokens <= 5 for sample in samples)
    assert all(sample.num_tokens == 5 for sample in samples if sample.finish_reason == "length")
    assert any(sample.finish_reason == "length" for sample in samples)


def test_hf_stops_at_the_end_of_the_context(short_path: Path) -> None:
    generator = HFGenerator(short_path)
    prompt = generator.render(CONVERSATIONS[1])
    room = 48 - len(generator.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=500, k=4, seed=0)
    samples = generator.generate([CONVERSATIONS[1]], params)[0]
    assert all(sample.num_tokens <= room for sample in samples)
    assert all(sample.num_tokens == room for sample in samples if sample.finish_reason == "length")
    with pytest.raises(GenerationError, match="prompt 0 has [0-9]+ tokens, leaving no room .* 48-token context"):
        generator.generate([[{"role": "user", "content": "x" * 60}]], params)


def test_hf_stops_at_eos_and_keeps_special_tokens(think_hf: HFGenerator) -> None:
    greedy = think_hf.generate(CONVERSATIONS[:2], GREEDY)
    assert greedy == [[Sample(text="", num_tokens=1, finish_reason="stop")] * GREEDY.k] * 2
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=30, k=8, seed=3)
    samples = [sample for group in think_hf.generate(CONVERSATIONS, params) for sample in group]
    assert all(sample.finish_reason == "stop" for sample in samples)
    # num_tokens counts the eos; the text keeps every <think> but not the eos.
    assert all(sample.text == "<think>" * (sample.num_tokens - 1) for sample in samples)
    assert any(sample.num_tokens > 2 for sample in samples)


def test_decode_completion_keeps_special_tokens_and_strips_eos_and_pad(think_hf: HFGenerator) -> None:
    tokenizer = think_hf.tokenizer
    ids = tokenizer.convert_tokens_to_ids
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    row = [ids("<think>"), ids("a"), ids("</think>"), ids("b"), eos, pad, pad]
    decoded = decode_completion(tokenizer, row, stop_ids={eos}, pad_id=pad)
    assert decoded == Sample(text="<think>a</think>b", num_tokens=5, finish_reason="stop")
    unfinished = decode_completion(tokenizer, [ids("<think>"), pad, ids("x")], stop_ids={eos}, pad_id=pad)
    assert unfinished == Sample(text="<think>x", num_tokens=3, finish_reason="length")


def test_sampling_params_validate_and_follow_the_decoding_config() -> None:
    params = SamplingParams.from_decoding(DecodingConfig(), k=4, seed=0)
    assert (params.temperature, params.top_p, params.max_new_tokens) == (0.6, 0.95, 16384)
    with pytest.raises(ValueError, match="k .* must be >= 1, got 0"):
        SamplingParams(0.6, 0.95, 16, k=0, seed=0)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got 1.5"):
        SamplingParams(0.6, 1.5, 16, k=1, seed=0)


def test_make_generator_backends(tiny_path: Path) -> None:
    generator = make_generator("hf", tiny_path, batch_sequences=4)
    assert isinstance(generator, HFGenerator) and isinstance(generator, Generator)
    generator.close()
    with pytest.raises(ValueError, match=r"unknown generation backend 'hff' \(did you mean 'hf'\?\)"):
        make_generator("hff", tiny_path)
    with pytest.raises(ValueError, match="needs base_url"):
        make_generator("openai", "tiny")
    client = make_generator("openai", "tiny", base_url="http://127.0.0.1:9/v1")
    assert isinstance(client, OpenAIGenerator) and client.model == "tiny"


def test_openai_chat_completions_serve_the_real_model(hf: HFGenerator) -> None:
    with OpenAIServer(hf, "tiny") as server:
        client = OpenAIGenerator(server.base_url, "tiny", max_concurrency=4)
        results = client.generate(CONVERSATIONS, SAMPLED)
        bodies = sorted((request["body"] for request in server.received), key=lambda body: body["seed"])
    assert [len(samples) for samples in results] == [SAMPLED.k] * len(CONVERSATIONS)
    assert [body["seed"] for body in bodies] == [SAMPLED.seed + index for index in range(len(CONVERSATIONS))]
    assert {(body["n"], body["max_tokens"], body["temperature"], body["top_p"]) for body in bodies} == {
        (3, 12, 0.6, 0.95)
    }
    for index, (conversation, samples) in enumerate(zip(CONVERSATIONS, results, strict=True)):
        direct = hf.generate([conversation], SamplingParams(0.6, 0.95, 12, 3, seed=SAMPLED.seed + index))[0]
        assert [(s.text, s.finish_reason) for s in samples] == [(s.text, s.finish_reason) for s in direct]
        # With n > 1, usage gives only the total, so each sample carries the average.
        average = round(sum(s.num_tokens for s in direct) / SAMPLED.k)
        assert all(sample.num_tokens == average for sample in samples)


def test_openai_completions_with_local_template_count_tokens_exactly(think_hf: HFGenerator, think_path: Path) -> None:
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=30, k=5, seed=11)
    with OpenAIServer(think_hf, "think") as server:
        client = OpenAIGenerator(server.base_url, "think", tokenizer_path=think_path)
        results = client.generate(CONVERSATIONS[:2], params)
        paths = {request["path"] for request in server.received}
    assert paths == {"/v1/completions"}
    for index, samples in enumerate(results):
        direct = think_hf.generate([CONVERSATIONS[index]], SamplingParams(1.0, 1.0, 30, 5, seed=11 + index))[0]
        assert samples == direct


def test_openai_client_retries_server_errors() -> None:
    with OpenAIServer(None, fail_first=2) as failing, OpenAIServer(None, fail_first=10) as dead:
        # The third attempt reaches the (generator-less) server's model check: proof it got past the 500s.
        client = OpenAIGenerator(failing.base_url, "other", retries=3)
        with pytest.raises(GenerationServerError, match=r"rejected with HTTP 400: .*unknown model 'other'"):
            client.generate(CONVERSATIONS[:1], SAMPLED)
        assert len(failing.received) == 3
        exhausted = OpenAIGenerator(dead.base_url, "tiny", retries=1)
        with pytest.raises(GenerationServerError, match=r"failed after 2 attempt\(s\), last: HTTP 500"):
            exhausted.generate(CONVERSATIONS[:1], SAMPLED)
        assert len(dead.received) == 2


def test_openai_client_retries_then_succeeds(hf: HFGenerator) -> None:
    with OpenAIServer(hf, "tiny", fail_first=2) as server:
        client = OpenAIGenerator(server.base_url, "tiny", retries=3)
        results = client.generate(CONVERSATIONS[:1], SAMPLED)
    assert len(server.received) == 3 and len(results[0]) == SAMPLED.k


def test_openai_client_names_a_dead_url() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = OpenAIGenerator(url, "tiny", retries=2)
    with pytest.raises(GenerationServerError, match=f"POST {url}/chat/completions failed after 3 attempt"):
        client.generate(CONVERSATIONS[:1], SAMPLED)


def test_openai_client_reaches_a_loopback_server_past_an_environment_proxy(
    hf: HFGenerator, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with OpenAIServer(hf, "tiny") as server:
        client = OpenAIGenerator(server.base_url, "tiny", retries=0)
        results = client.generate(CONVERSATIONS[:1], SAMPLED)
        client.close()
        with pytest.raises(GenerationServerError, match="is closed"):
            client.generate(CONVERSATIONS[:1], SAMPLED)
    assert len(server.received) == 1 and len(results[0]) == SAMPLED.k


def test_vllm_argument_builders() -> None:
    assert vllm_engine_args("/models/q", tensor_parallel_size=2, dtype="bfloat16", max_model_len=4096, seed=5) == {
        "model": "/models/q",
        "tokenizer": "/models/q",
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "seed": 5,
        "gpu_memory_utilization": 0.9,
    }
    assert vllm_sampling_args(SAMPLED) == {
        "n": 3,
        "temperature": 0.6,
        "top_p": 0.95,
        "max_tokens": 12,
        "seed": 7,
        "skip_special_tokens": False,
    }


def test_vllm_without_vllm_names_the_extra(monkeypatch: pytest.MonkeyPatch, tiny_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail even where it is installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'ade-core\[gpu\]'"):
        VLLMGenerator(tiny_path)
    with pytest.raises(MissingDependencyError, match="vllm>=0.22,<=0.31"):
        make_generator("vllm", tiny_path)


def test_closing_frees_the_weights_without_a_garbage_collection(tiny_path):
    """``close`` drops the model without ``gc.collect()`` (an attempt collects once): nothing may keep it alive."""
    import gc
    import weakref

    generator = HFGenerator(tiny_path)
    generator.generate(CONVERSATIONS[:2], SAMPLED)
    model, weight = weakref.ref(generator.model), weakref.ref(next(generator.model.parameters()))
    gc.disable()
    try:
        generator.close()
        assert model() is None and weight() is None
    finally:
        gc.enable()


def test_grpo_rewards_see_rollouts_as_evaluation_decodes_them(think_hf: HFGenerator) -> None:
    """TRL's completions drop special tokens; the reward pipeline decodes the ids itself, keeping
    <think>/</think>, so a format reward can see the tags the grader sees at evaluation."""
    from ade_core.engine.training.grpo import response_decoder
    from ade_core.engine.training.rewards import RewardPipeline
    from ade_core.plugins import load_plugins

    tokenizer = think_hf.tokenizer
    ids = tokenizer.convert_tokens_to_ids
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    row = [ids("<think>"), ids("a"), ids("</think>"), ids("b"), eos, pad]
    trl_text = tokenizer.decode(row, skip_special_tokens=True)
    assert "<think>" not in trl_text  # what TRL hands a reward function
    grader = load_plugins().graders()["boxed_exact"]
    seen = {}
    for decode in (None, response_decoder(tokenizer)):
        pipe = RewardPipeline(grader, 1, decode=decode)
        pipe([[{"role": "user", "content": "q"}]], [trl_text], [row], answer=["b"], problem_id=["p"])
        seen[decode is None] = pipe.last_batch[0].response
    assert seen == {True: trl_text, False: "<think>a</think>b"}
