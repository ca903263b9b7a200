"""Building and locating the tiny world: data files, the defect labels (kept apart), the base model.

Data are regenerated deterministically in seconds; the pretrained base model ships as package
data (``ade_core/tiny/weights``) so no machine has to spend the CPU minutes to build it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from ade_core.schemas.common import sha256_digest
from ade_core.tiny.basemodel import BaseModelRecipe, pretrain
from ade_core.tiny.candidates import CHAT_TOPICS, DEFAULT_RATES, WORDS, build_candidates
from ade_core.tiny.math_pool import math_shares_pool
from ade_core.tiny.problems import SUBJECTS, MathProblem, generate_problems, problem_key, write_jsonl
from ade_core.tiny.splits import stratified_sample
from ade_core.tiny.tokenizer import build_tokenizer

SHIPPED_WEIGHTS = Path(__file__).resolve().parent / "weights"
SHIPPED_TARGET_WEIGHTS = {"tiny-sft": Path(__file__).resolve().parent / "weights-sft"}
SYSTEM_PROMPT = "Think in <think></think>, then box the answer."
HELD_OUT = ("held_out_harder", "held_out_numbers", "held_out_reworded", "held_out_subjects")
TRAINING_SPLITS = ("rft_pool", "rft_pool_hard", "rft_pool_mid", "rft_pool_math", "sft_problems")


@dataclass(frozen=True)
class WorldSpec:
    """Sizes and seeds of one tiny world (chosen by ADE; the `tiny` preset is the default)."""

    name: str = "tiny"
    # Bumped whenever the generators' output changes (problem text, worked steps, defects), so a
    # cached world and the shipped weights are never paired with data they were not built from.
    generator_version: int = 3
    seed: int = 0
    in_loop: int = 300
    held_out: int = 150
    rft_pool: int = 1000
    # A second RFT pool weighted to the hard levels, where all-wrong rollout groups are common
    # (Reward Design: process credit gives gradient there, the outcome does not).
    rft_pool_hard: int = 1000
    rft_pool_hard_level_weights: tuple[float, ...] = (1, 1, 2, 3, 3)
    # A third, of the middle levels only: the base solves about a third of their samples, so most
    # outcome groups still carry signal while a wrong response usually has sound steps to credit.
    rft_pool_mid: int = 1000
    rft_pool_mid_levels: tuple[int, ...] = (3, 4)
    # The paper-scale curriculum pool: MATH's subject x level shares, a few prompts over the tiny
    # prompt limit (``math_pool.py``); 0 leaves it out.
    rft_pool_math: int = 3072
    rft_pool_math_overlength: int = 3
    sft_math: int = 1600
    sft_chat: int = 400
    pretrain_conversations: int = 40000
    pretrain_level_weights: tuple[float, ...] = (4, 4, 4, 1, 1)
    # The corpus carries the pool's defects at 0.3x their rates, except these (rate per trajectory).
    # A quarter of unboxed answers gives the base a real format weakness, as base models have:
    # an outcome reward can teach it within a short GRPO run, and curated SFT data fixes it too.
    pretrain_defect_overrides: tuple[tuple[str, float], ...] = (("missing_box", 0.25),)
    in_loop_levels: tuple[int, ...] = (1, 2, 3)
    defect_rates: tuple[tuple[str, float], ...] = tuple(DEFAULT_RATES.items())
    recipe: BaseModelRecipe = field(default_factory=BaseModelRecipe)

    def digest(self) -> str:
        return sha256_digest(asdict(self))

    def model_digest(self) -> str:
        """What the base model depends on: the recipe, the pretraining corpus and the problems kept
        out of it (every preset's evaluation splits, so all presets can share one set of weights)."""
        return sha256_digest(
            {
                "generator_version": self.generator_version,
                "seed": self.seed,
                "pretrain_conversations": self.pretrain_conversations,
                "pretrain_level_weights": self.pretrain_level_weights,
                "pretrain_defect_overrides": self.pretrain_defect_overrides,
                "recipe": asdict(self.recipe),
                "excluded": sha256_digest(sorted(evaluation_keys())),
            }
        )


PRESETS = {
    "tiny": WorldSpec(),
    # The paper's proportions: 3,840 candidates -> 384 selected, a 3,072-problem RFT pool.
    # Its larger in-loop set leaves too few low-level problems for the curriculum pool: that is the tiny world's.
    "tiny-full": WorldSpec(name="tiny-full", rft_pool=3072, sft_math=3072, sft_chat=768, in_loop=500, rft_pool_math=0),
}


@dataclass(frozen=True)
class TargetSpec:
    """The SFT target (``model.target = "tiny-sft"``): a model of the tiny world whose native reasoning is
    off, as in the paper's SFT set-up. Its chat answers come in one step, with no ``<think>`` span (so it
    is mostly wrong on multi-digit work), while worked column-by-column solutions appear elsewhere in its
    corpus as plain documents: the skill is latent, and SFT data teaches the protocol that uses it. Its
    tokenizer lacks ``<think>`` and ``</think>``; the Engine adds them (paper Appendix D.3). Evaluated on
    the data of ``world``; the base model and its RFT presets are not affected."""

    name: str = "tiny-sft"
    world: str = "tiny"
    generator_version: int = 4
    seed: int = 0
    chat_answers: int = 6000
    worked_documents: int = 40000
    other_chat: int = 2000
    level_weights: tuple[float, ...] = (4, 4, 4, 1, 1)
    recipe: BaseModelRecipe = field(default_factory=lambda: BaseModelRecipe(steps=3000))

    def model_digest(self) -> str:
        return sha256_digest({**asdict(self), "excluded": sha256_digest(sorted(evaluation_keys()))})


@dataclass(frozen=True)
class ContinuedTargetSpec:
    """An RFT target continued from the world's base model: a short schedule on a corpus like the base's
    own (its seed apart) with other defect rates, so the target keeps the base's skills and changes
    one habit. ``tiny-boxed`` answers in a box almost always (the base leaves about a fifth of its
    samples unboxed), so process credit in Reward Design is not confounded by the format weakness."""

    name: str
    defect_overrides: tuple[tuple[str, float], ...]
    world: str = "tiny"
    seed: int = 100
    conversations: int = 6400
    recipe: BaseModelRecipe = field(
        default_factory=lambda: BaseModelRecipe(steps=200, learning_rate=3e-4, warmup_steps=0)
    )

    def model_digest(self) -> str:
        return sha256_digest({**asdict(self), "base": PRESETS[self.world].model_digest()})


TARGETS: dict[str, TargetSpec | ContinuedTargetSpec] = {
    "tiny-sft": TargetSpec(),
    "tiny-boxed": ContinuedTargetSpec(name="tiny-boxed", defect_overrides=(("missing_box", 0.0),)),
}


def one_step_answer(problem: MathProblem) -> str:
    """The SFT target's chat answer: the result in one step, boxed, with no worked span."""
    return f"The answer is \\boxed{{{problem.answer}}}."


def worked_document(problem: MathProblem) -> str:
    """A plain-text transcript (no chat markup tokens, no think tokens), as web text quotes a tutoring
    session: the question, then the column-by-column working and the boxed answer."""
    return f"user\n{problem.problem}\nassistant\n{problem.solution}\nThe answer is \\boxed{{{problem.answer}}}."


def target_corpus(spec: TargetSpec, excluded: AbstractSet[str]) -> list[str | list[dict[str, str]]]:
    """One-step chat answers, worked plain documents and non-math chat, shuffled; no evaluation problem."""
    wanted = spec.chat_answers + spec.worked_documents
    problems = [
        p
        for p in generate_problems(wanted * 2, spec.seed + 11, level_weights=spec.level_weights, distinct=False)
        if problem_key(p.problem) not in excluded
    ][:wanted]
    rng = random.Random(spec.seed + 12)
    corpus: list[str | list[dict[str, str]]] = []
    for problem in problems[: spec.chat_answers]:
        messages = [
            {"role": "user", "content": problem.problem},
            {"role": "assistant", "content": one_step_answer(problem)},
        ]
        if rng.random() < 0.5:
            messages.insert(0, {"role": "system", "content": SYSTEM_PROMPT})
        corpus.append(messages)
    corpus += [worked_document(p) for p in problems[spec.chat_answers :]]
    for index in range(spec.other_chat):
        template, solve = CHAT_TOPICS[index % len(CHAT_TOPICS)]
        word = rng.choice(WORDS)
        corpus.append(
            [{"role": "user", "content": template.format(w=word)}, {"role": "assistant", "content": solve(word)}]
        )
    rng.shuffle(corpus)
    return corpus


def continued_corpus(spec: ContinuedTargetSpec, excluded: AbstractSet[str]) -> list[list[dict[str, str]]]:
    """The continued target's corpus: the base's kind of corpus under the target's seed, size and defect rates."""
    world = replace(
        PRESETS[spec.world],
        seed=spec.seed,
        pretrain_conversations=spec.conversations,
        pretrain_defect_overrides=spec.defect_overrides,
    )
    return pretraining_corpus(world, excluded)


def build_target_model(
    spec: TargetSpec | ContinuedTargetSpec,
    directory: Path,
    *,
    steps: int | None = None,
    conversations: int | None = None,
    log_every: int = 100,
    save_every: int = 0,
    score_problems: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train a target into ``directory / 'model'``: the SFT target from scratch, a continued target from
    the base model (``steps`` / ``conversations`` shorten the schedule, the corpus kept in its
    proportions), then score it on the world's in-loop split."""
    if isinstance(spec, ContinuedTargetSpec):
        if conversations:
            spec = replace(spec, conversations=conversations)
        if steps:
            spec = replace(spec, recipe=replace(spec.recipe, steps=steps))
        base = world_dir(spec.world) / "model"
        if not (base / "config.json").is_file():
            raise FileNotFoundError(f"the base model of {spec.world!r} is not built at {base}; run: ade tiny build")
        continued = continued_corpus(spec, evaluation_keys())
        summary = pretrain(
            continued, directory / "model", spec.recipe, log_every, save_every, device=device, start_from=base
        )
        return _finish_target(spec, directory, summary, score_problems)
    if conversations:
        total = spec.chat_answers + spec.worked_documents + spec.other_chat
        spec = replace(
            spec,
            chat_answers=spec.chat_answers * conversations // total,
            worked_documents=spec.worked_documents * conversations // total,
            other_chat=spec.other_chat * conversations // total,
        )
    if steps:
        spec = replace(spec, recipe=replace(spec.recipe, steps=steps))
    corpus = target_corpus(spec, evaluation_keys())
    tokenizer = build_tokenizer(think_tokens=False)
    summary = pretrain(corpus, directory / "model", spec.recipe, log_every, save_every, tokenizer, device)
    return _finish_target(spec, directory, summary, score_problems)


def _finish_target(
    spec: TargetSpec | ContinuedTargetSpec, directory: Path, summary: dict[str, Any], score_problems: int | None
) -> dict[str, Any]:
    summary["target"] = spec.name
    summary["model_digest"] = spec.model_digest()
    summary["scores"] = score_model(directory / "model", build_splits(PRESETS[spec.world])["in_loop"][:score_problems])
    (directory / "model" / "pretraining.json").write_text(json.dumps(summary, indent=2))
    return summary


def target_dir(name: str) -> Path:
    """A target's directory under the ADE cache, with its shipped weights copied in when their model
    digest matches the spec (a build is asked for otherwise)."""
    if name not in TARGETS:
        raise ValueError(f"unknown tiny target {name!r}; known: {sorted(TARGETS)}")
    spec = TARGETS[name]
    digest = spec.model_digest()
    directory = cache_root() / f"{name}-{digest.split(':')[1][:12]}"
    shipped = SHIPPED_TARGET_WEIGHTS.get(name)
    if shipped and not (directory / "model").exists() and _weights_digest(shipped) == digest:
        staging = directory / f"model.tmp{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(shipped, staging)
        try:
            staging.rename(directory / "model")
        except OSError:  # another process installed them first
            shutil.rmtree(staging, ignore_errors=True)
    return directory


def install_target(name: str, built: Path) -> Path:
    """Move a full-recipe build of target ``name`` (a model directory) where ``model.target = name`` finds
    it; the installed model directory. A build whose digest is not the spec's is refused."""
    digest = TARGETS[name].model_digest()
    if _weights_digest(built) != digest:
        raise ValueError(f"{built} is not a build of {name!r} at its recipe (model digest {digest})")
    destination = target_dir(name) / "model"
    if destination.exists():
        shutil.rmtree(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(built), destination)
    return destination


def cache_root() -> Path:
    base = os.environ.get("ADE_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ade"
    return Path(base) / "tiny"


def _disjoint(problems: list[MathProblem], taken: set[str], count: int, what: str) -> list[MathProblem]:
    fresh = [p for p in problems if problem_key(p.problem) not in taken][:count]
    if len(fresh) < count:
        raise ValueError(f"only {len(fresh)} fresh problems for {what}, {count} needed")
    taken.update(problem_key(p.problem) for p in fresh)
    return fresh


@functools.cache
def evaluation_keys() -> frozenset[str]:
    """Normalized text of every evaluation problem (in-loop and held-out) of every preset (computed once)."""
    return frozenset(
        problem_key(p.problem)
        for spec in PRESETS.values()
        for name, problems in build_splits(spec).items()
        if name not in TRAINING_SPLITS
        for p in problems
    )


def build_splits(spec: WorldSpec) -> dict[str, list[MathProblem]]:
    """In-loop (stratified subject x level), four shifted held-out sets, the RFT pool and the SFT
    problems; all disjoint by normalized problem text."""
    bank = generate_problems(spec.in_loop * 12, spec.seed, levels=spec.in_loop_levels)
    uniform = {(s, lvl): 1.0 for s in SUBJECTS for lvl in spec.in_loop_levels}
    in_loop = stratified_sample(bank, lambda p: (p.subject, p.level), uniform, spec.in_loop, spec.seed)
    taken = {problem_key(p.problem) for p in in_loop}
    n = spec.held_out
    splits = {"in_loop": in_loop}
    seed = spec.seed + 1000
    splits["held_out_harder"] = _disjoint(generate_problems(n * 3, seed + 1, levels=(4, 5)), taken, n, "harder")
    splits["held_out_numbers"] = _disjoint(
        generate_problems(n * 3, seed + 2, levels=spec.in_loop_levels, scale=4), taken, n, "numbers"
    )
    splits["held_out_reworded"] = _disjoint(
        generate_problems(n * 3, seed + 3, levels=spec.in_loop_levels, reworded=True), taken, n, "reworded"
    )
    splits["held_out_subjects"] = _disjoint(
        generate_problems(n * 3, seed + 4, subjects=("Counting & Probability", "Geometry"), levels=(2, 3, 4)),
        taken,
        n,
        "subjects",
    )
    train_bank = generate_problems((spec.rft_pool + spec.sft_math) * 3, seed + 5, level_weights=(3, 3, 2, 1, 1))
    splits["rft_pool"] = _disjoint(train_bank, taken, spec.rft_pool, "RFT pool")
    splits["sft_problems"] = _disjoint(train_bank, taken, spec.sft_math, "SFT candidates")
    hard_bank = generate_problems(spec.rft_pool_hard * 3, seed + 11, level_weights=spec.rft_pool_hard_level_weights)
    splits["rft_pool_hard"] = _disjoint(hard_bank, taken, spec.rft_pool_hard, "hard RFT pool")
    mid_bank = generate_problems(spec.rft_pool_mid * 3, seed + 12, levels=spec.rft_pool_mid_levels)
    splits["rft_pool_mid"] = _disjoint(mid_bank, taken, spec.rft_pool_mid, "middle-level RFT pool")
    if spec.rft_pool_math:
        evaluation = {problem_key(p.problem) for name in ("in_loop", *HELD_OUT) for p in splits[name]}
        splits["rft_pool_math"] = math_shares_pool(
            spec.rft_pool_math, spec.rft_pool_math_overlength, seed + 13, evaluation
        )
    return splits


def pretraining_corpus(spec: WorldSpec, excluded: AbstractSet[str]) -> list[list[dict[str, str]]]:
    """A separate synthetic corpus (its own seed), with no evaluation problem in it: ~10% of it carries the
    pool's defects at lower rates, and a quarter answers without a box (``pretrain_defect_overrides``)."""
    # Drawn with replacement: level 1 has few distinct problems, and a distinct-only corpus would
    # starve it (an earlier build scored lower on level 1 than on level 3 for that reason).
    problems = [
        p
        for p in generate_problems(
            spec.pretrain_conversations * 2, spec.seed + 7, level_weights=spec.pretrain_level_weights, distinct=False
        )
        if problem_key(p.problem) not in excluded
    ][: spec.pretrain_conversations]
    rates = {name: rate * 0.3 for name, rate in spec.defect_rates} | dict(spec.pretrain_defect_overrides)
    candidates = build_candidates(problems, spec.pretrain_conversations // 10, spec.seed + 8, rates)
    rng = random.Random(spec.seed + 9)
    conversations = []
    for candidate in candidates:
        messages = list(candidate.messages)
        if rng.random() < 0.5:
            messages.insert(0, {"role": "system", "content": SYSTEM_PROMPT})
        conversations.append(messages)
    return conversations


def write_world(spec: WorldSpec, directory: Path) -> dict[str, Any]:
    """Write every data file of the world; defect labels go to ``ground_truth/``, apart."""
    splits = build_splits(spec)
    data = directory / "data"
    for name, problems in splits.items():
        if name != "sft_problems":
            write_jsonl(data / f"{name}.jsonl", (p.to_json() for p in problems))
    candidates = build_candidates(splits["sft_problems"], spec.sft_chat, spec.seed + 6, dict(spec.defect_rates))
    random.Random(spec.seed + 10).shuffle(candidates)
    write_jsonl(data / "candidates.jsonl", (c.to_group() for c in candidates))
    write_jsonl(
        directory / "ground_truth" / "defects.jsonl",
        ({"candidate_id": c.candidate_id, "defect": c.defect} for c in candidates),
    )
    defects = Counter(c.defect or "clean" for c in candidates)
    info = {
        "spec": asdict(spec),
        "digest": spec.digest(),
        "sizes": {k: len(v) for k, v in splits.items()},
        "candidates": len(candidates),
        "defects": dict(sorted(defects.items())),
    }
    (directory / "world.json").write_text(json.dumps(info, indent=2))
    return info


def build_model(
    spec: WorldSpec,
    directory: Path,
    *,
    steps: int | None = None,
    conversations: int | None = None,
    log_every: int = 100,
    save_every: int = 0,
    score_problems: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Pretrain the base model from scratch into ``directory / 'model'`` (``steps`` / ``conversations``
    shorten the schedule, e.g. to prove the code path in CI; the shipped weights use the spec's),
    then score it on the in-loop split (the first ``score_problems`` problems; all by default)."""
    if conversations:
        spec = replace(spec, pretrain_conversations=conversations)
    excluded = evaluation_keys()
    if steps:
        spec = replace(spec, recipe=replace(spec.recipe, steps=steps))
    recipe = spec.recipe
    corpus = pretraining_corpus(spec, excluded)
    summary = pretrain(corpus, directory / "model", recipe, log_every=log_every, save_every=save_every, device=device)
    summary["model_digest"] = spec.model_digest()
    summary["scores"] = score_model(directory / "model", build_splits(spec)["in_loop"][:score_problems])
    (directory / "model" / "pretraining.json").write_text(json.dumps(summary, indent=2))
    return summary


def score_model(
    model_dir: Path, problems: list[MathProblem], samples: int = 4, temperature: float = 0.8, seed: int = 0
) -> dict[str, Any]:
    """Greedy accuracy and per-sample accuracy (``samples`` draws at ``temperature``, top-p 0.95)
    of the model on ``problems``, overall and by level, in percent, with the system prompt."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ade_core.engine.grading.boxed import last_boxed

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    hits: dict[str, dict[str, list[bool]]] = {"greedy": {}, "sampled": {}}
    for start in range(0, len(problems), 50):
        batch = problems[start : start + 50]
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": p.problem}],
                add_generation_prompt=True,
                tokenize=False,
            )
            for p in batch
        ]
        encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        width = encoded["input_ids"].shape[1]
        for mode, draws in (("greedy", 1), ("sampled", samples)):
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 0.95} if mode == "sampled" else {}
            with torch.no_grad():
                out = model.generate(
                    **encoded,
                    max_new_tokens=128,
                    num_return_sequences=draws,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                    **({"do_sample": False} | sampling),
                )
            for index, sequence in enumerate(out):
                problem = batch[index // draws]
                text = cast(str, tokenizer.decode(sequence[width:], skip_special_tokens=True))  # one sequence: one str
                correct = last_boxed(text) == problem.answer
                for key in ("all", f"level_{problem.level}"):
                    hits[mode].setdefault(key, []).append(correct)
    return {
        "problems": len(problems),
        "samples": samples,
        "temperature": temperature,
        **{
            mode: {key: round(100 * sum(v) / len(v), 1) for key, v in sorted(table.items())}
            for mode, table in hits.items()
        },
    }


def _weights_digest(weights: Path) -> str | None:
    summary = weights / "pretraining.json"
    if not (weights / "config.json").is_file() or not summary.is_file():
        return None
    return json.loads(summary.read_text()).get("model_digest")


def shipped_model_digest() -> str | None:
    """The model digest the shipped weights were built for (None when no weights ship)."""
    return _weights_digest(SHIPPED_WEIGHTS)


def world_dir(preset: str = "tiny") -> Path:
    """The world's directory, built on first use: data regenerated, shipped weights copied in."""
    if preset not in PRESETS:
        raise ValueError(f"unknown tiny preset {preset!r}; known: {sorted(PRESETS)}")
    spec = PRESETS[preset]
    directory = cache_root() / f"{preset}-{spec.digest().split(':')[1][:12]}"
    if not (directory / "world.json").exists():
        staging = directory.with_name(directory.name + f".tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        write_world(spec, staging)
        if shipped_model_digest() == spec.model_digest():
            shutil.copytree(SHIPPED_WEIGHTS, staging / "model")
        staging.parent.mkdir(parents=True, exist_ok=True)
        if not directory.exists():
            staging.rename(directory)
        else:
            shutil.rmtree(staging, ignore_errors=True)
    elif not (directory / "model").exists() and shipped_model_digest() == spec.model_digest():
        # Built while no matching weights were installed; matching weights have arrived since.
        staging = directory / f"model.tmp{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(SHIPPED_WEIGHTS, staging)
        try:
            staging.rename(directory / "model")
        except OSError:  # another process installed them first
            shutil.rmtree(staging, ignore_errors=True)
    return directory
