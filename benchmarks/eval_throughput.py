"""Evaluation throughput: grading samples per second, as ratios to single-worker baselines.

Every in-loop and held-out evaluation grades K samples per problem (paper Appendix D.5), so
grading speed bounds how often checkpoints can be evaluated. Sections:
  (a) math: in-process single-threaded math-verify against ``grade_batch`` with worker processes;
  (b) code: short stdin programs graded in the sandbox, 1 worker against ``--workers``;
  (c) generation: the hf backend on the tiny model, batched against one sequence at a time;
  (d) grading cost per evaluation call of an attempt (online evaluation of each checkpoint, then
      the offline one): a fresh pool per call, as the Engine did, against one pool per attempt.

Nothing fails: each figure is printed next to its target. ``--quick`` runs every section at tiny
sizes in seconds (CI runs it to keep the script working; its figures are not measurements).
Run: .venv/bin/python benchmarks/eval_throughput.py [--quick] [--math-samples N] [--programs N] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ade_core.engine.grading.code import grade_code
from ade_core.engine.grading.math import grade_math_verify
from ade_core.engine.grading.pool import GradeOutcome, GradingPool, grade_batch
from ade_core.plugins import load_plugins

MATH_TARGET = 150.0  # graded samples/s with 2 workers
CODE_TARGET = 20.0  # graded programs/s with 2 workers

REASONING = (
    "We set up the equation from the problem statement and simplify both sides. "
    "Substituting the constraint gives a single variable, which we solve for directly. "
)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def math_pairs(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """Deterministic (response, gold) pairs: fractions, decimals, radicals and integers, about half correct."""
    rng = random.Random(seed)
    pairs = []
    for i in range(count):
        p, q = rng.randint(1, 40), rng.randint(2, 40)
        kind = i % 4
        if kind == 0:
            gold, right, wrong = f"\\frac{{{p}}}{{{q}}}", f"\\dfrac{{{p}}}{{{q}}}", f"\\frac{{{p + 1}}}{{{q}}}"
        elif kind == 1:
            gold, right, wrong = f"{p / 4:g}", f"\\frac{{{p}}}{{4}}", f"{p / 4 + 0.5:g}"
        elif kind == 2:
            gold, right, wrong = f"\\sqrt{{{4 * p}}}", f"2\\sqrt{{{p}}}", f"3\\sqrt{{{p}}}"
        else:
            gold, right, wrong = f"{p * q}", f"{p * q}", f"{p * q + 1}"
        answer = right if rng.random() < 0.5 else wrong
        pairs.append((f"{REASONING * rng.randint(1, 4)}Therefore the answer is $\\boxed{{{answer}}}$.", gold))
    return pairs


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


# --- (a) math grading -------------------------------------------------------------------------
def math_grading(samples: int, workers: int) -> None:
    pairs = math_pairs(samples)
    grader = load_plugins().graders()["math_verify"]
    print(f"\n(a) Math grading: {samples} (response, gold) pairs, grader {grader.name!r}")
    grade_math_verify(*pairs[0])  # import math-verify and build its parsers outside the timed loop
    base_s, expected = timed(lambda: [grade_math_verify(r, g) for r, g in pairs])
    base = rate(samples, base_s)
    correct = sum(expected)
    print(f"{'case':44} {'seconds':>8} {'samples/s':>10} {'x baseline':>11}  target")
    print(f"{'baseline: in-process, single thread':44} {base_s:8.2f} {base:10.1f} {1.0:11.2f}")
    with GradingPool(grader, workers) as pool:
        cases: list[tuple[str, Callable[[], list[GradeOutcome]]]] = [
            (f"grade_batch, {workers} fresh workers", lambda: grade_batch(grader, pairs, workers)),
            (f"GradingPool, {workers} workers kept from a batch", lambda: pool.grade(pairs)),
        ]
        pool.grade(math_pairs(8 * workers, seed=1))  # the kept workers have graded before, as in a training run
        for name, run in cases:
            seconds, outcomes = timed(run)
            speed = rate(samples, seconds)
            agree = sum(o.correct == e for o, e in zip(outcomes, expected, strict=True))
            target = f">= {MATH_TARGET:g}/s ({verdict(speed >= MATH_TARGET)})" if workers == 2 else ""
            print(f"{name:44} {seconds:8.2f} {speed:10.1f} {speed / base:11.2f}  {target}")
            if agree != samples:
                print(f"  verdicts differ from the baseline on {samples - agree} samples")
    print(f"{correct} of {samples} graded correct; target: >= {MATH_TARGET:g} graded samples/s with 2 workers")


# --- (b) code grading -------------------------------------------------------------------------
def code_pairs(count: int) -> list[tuple[str, dict[str, Any]]]:
    """Short stdin programs, each with two tests; every third one prints a wrong answer."""
    pairs = []
    for i in range(count):
        offset = 1 if i % 3 == 2 else 0
        source = f"a, b = map(int, input().split())\nprint(a * b + {i + offset})\n"
        tests = [{"stdin": f"{x} {x + 1}\n", "expected_stdout": f"{x * (x + 1) + i}\n"} for x in (2, 7)]
        pairs.append((f"Here is my solution:\n```python\n{source}```\n", {"tests": tests}))
    return pairs


def grade_in_threads(pairs: Sequence[tuple[str, Any]], workers: int) -> list[bool]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda pair: grade_code(*pair), pairs))


def code_grading(programs: int, workers: int) -> None:
    pairs = code_pairs(programs)
    grader = load_plugins().graders()["code_tests"]
    print(f"\n(b) Code grading: {programs} stdin programs with 2 tests each, run in the sandbox")
    grade_code(*pairs[0])  # first sandbox launch pays one-off imports
    base_s, expected = timed(lambda: grade_in_threads(pairs, 1))
    base = rate(programs, base_s)
    cases: list[tuple[str, Callable[[], list[bool]]]] = [
        (f"grade_code, {workers} threads", lambda: grade_in_threads(pairs, workers)),
        (f"grade_batch, {workers} worker processes", lambda: [o.correct for o in grade_batch(grader, pairs, workers)]),
    ]
    print(f"{'case':44} {'seconds':>8} {'programs/s':>10} {'x baseline':>11}  target")
    print(f"{'baseline: grade_code, 1 thread':44} {base_s:8.2f} {base:10.1f} {1.0:11.2f}")
    for name, run in cases:
        seconds, verdicts = timed(run)
        speed = rate(programs, seconds)
        target = f">= {CODE_TARGET:g}/s ({verdict(speed >= CODE_TARGET)})" if workers == 2 else ""
        print(f"{name:44} {seconds:8.2f} {speed:10.1f} {speed / base:11.2f}  {target}")
        if verdicts != expected:
            print("  verdicts differ from the baseline")
    print(f"{sum(expected)} of {programs} passed; target: >= {CODE_TARGET:g} programs/s with 2 workers")


def generation_throughput(prompts: int, k: int, new_tokens: int) -> None:
    """Tokens/s of the hf backend on the tiny model: batched generate vs one prompt at a time."""
    import tempfile

    from ade_core.engine.generation import SamplingParams, make_generator
    from ade_core.engine.tiny_lm import build_tiny_lm

    print(f"\n(c) Generation, hf backend, tiny model: {prompts} prompts x k={k}, up to {new_tokens} new tokens")
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_lm(Path(tmp) / "model")
        conversations = [[{"role": "user", "content": f"What is {i} + {i * 3}?"}] for i in range(prompts)]
        params = SamplingParams(temperature=0.6, top_p=0.95, max_new_tokens=new_tokens, k=k, seed=0)
        batched = make_generator("hf", path, batch_sequences=16)
        single = make_generator("hf", path, batch_sequences=1)
        batched.generate(conversations[:2], params)  # warm-up outside the timed runs
        one_s, one = timed(lambda: single.generate(conversations[:8], params))
        many_s, many = timed(lambda: batched.generate(conversations, params))
        batched.close()
        single.close()
    one_tokens = sum(s.num_tokens for group in one for s in group)
    many_tokens = sum(s.num_tokens for group in many for s in group)
    base = rate(one_tokens, one_s)
    print(f"{'case':44} {'seconds':>8} {'tokens/s':>10} {'x baseline':>11}")
    print(f"{'baseline: 1 sequence per batch (8 prompts)':44} {one_s:8.2f} {base:10.1f} {1.0:11.2f}")
    speed = rate(many_tokens, many_s)
    print(f"{'16 sequences per batch':44} {many_s:8.2f} {speed:10.1f} {speed / base:11.2f}")


# --- (d) grading cost per evaluation call -----------------------------------------------------
def grading_per_call(calls: int, samples: int, workers: int) -> None:
    """An attempt grades ``calls`` evaluations; a fresh pool per call re-imports the grader each time."""
    grader = load_plugins().graders()["math_verify"]
    batches = [math_pairs(samples, seed=call) for call in range(calls)]
    print(f"\n(d) Grading per evaluation call: {calls} calls of {samples} samples, {workers} workers, math-verify")

    def fresh() -> None:
        for pairs in batches:
            grade_batch(grader, pairs, workers)

    def kept() -> None:
        with GradingPool(grader, workers) as pool:
            for pairs in batches:
                pool.grade(pairs)

    fresh_s, _ = timed(fresh)
    kept_s, _ = timed(kept)
    print(f"{'case':44} {'seconds':>8} {'s/call':>10} {'x baseline':>11}")
    print(f"{'baseline: a fresh pool per call (before)':44} {fresh_s:8.2f} {fresh_s / calls:10.3f} {1.0:11.2f}")
    print(f"{'one pool per attempt (now)':44} {kept_s:8.2f} {kept_s / calls:10.3f} {kept_s / fresh_s:11.2f}")
    print(f"saved per attempt: {fresh_s - kept_s:.2f} s ({(fresh_s - kept_s) / calls:.3f} s per call)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--math-samples", type=int, default=400, help="math pairs in section (a) (default 400)")
    parser.add_argument("--programs", type=int, default=60, help="programs in section (b) (default 60)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes or threads (default 2)")
    parser.add_argument("--gen-prompts", type=int, default=32, help="prompts in section (c) (default 32)")
    parser.add_argument("--calls", type=int, default=3, help="evaluation calls in section (d) (default 3)")
    parser.add_argument("--call-samples", type=int, default=1200, help="samples per call in (d) (default 1200)")
    parser.add_argument("--quick", action="store_true", help="every section at tiny sizes (seconds; CI)")
    args = parser.parse_args()
    if args.quick:
        args.math_samples, args.programs, args.gen_prompts, args.calls, args.call_samples = 16, 4, 4, 2, 16

    started = time.perf_counter()
    # Worker speed-ups are bounded by idle cores; other load on the machine shows up here.
    print(f"cpu cores: {os.cpu_count()}, load average (1 min) at start: {os.getloadavg()[0]:.2f}")
    math_grading(args.math_samples, args.workers)
    code_grading(args.programs, args.workers)
    generation_throughput(args.gen_prompts, k=4, new_tokens=8 if args.quick else 64)
    grading_per_call(args.calls, args.call_samples, args.workers)
    print(f"\ntotal benchmark time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
