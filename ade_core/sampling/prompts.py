"""ADE's own wording of the three prompts strategic sampling needs (seed 001, Sec 3 and Appendix A.9).

What each prompt must ask for follows the seed: the Verbalized Sampling planner asks for n
approaches in ``<approach>`` blocks, each opening with its estimated probability; the Groot
planner asks for a labelled decision tree in ``<tree>`` and n root-to-leaf paths, each announced by
a ``Path:`` line before its ``<approach>`` block; the executor gets the problem with one approach
as a hidden basis and must present the reasoning as its own. The wording is ADE's. ``{problem}``,
``{n}`` and ``{approach}`` are filled in; the answer format line comes from the problem's domain.
"""

from __future__ import annotations

VERBALIZED_PLANNER = """Here is a problem to solve.

PROBLEM:
{problem}

List {n} different high-level approaches someone could take to solve it, drawn at random from the \
whole range of plausible approaches rather than {n} variations of the most obvious one. For each, \
estimate its probability (a number from 0.0 to 1.0) of being the approach taken, relative to all \
the ways of solving the problem.

Write each approach as a short prose summary of the whole line of reasoning: the key decision that \
sets it apart, why it works, and the main steps, so that a solver could carry it out without \
further thought. No code and no final answer.

Put each approach in its own <approach></approach> block, and start each block with a line \
"Probability: <p>"."""

GROOT_PLANNER = """Here is a problem to solve.

PROBLEM:
{problem}

First write a decision tree of ways to solve it inside <tree></tree> tags. Label the top-level \
strategies A., B., C., ...; label a decision under a strategy by extending its label (A1., A2.) and \
an option of that decision by extending again (A1a., A1b.). Top-level entries must be genuinely \
different strategies. Only include decisions with real, reasonable alternatives, one short phrase \
per entry, so that every root-to-leaf path reads as a complete, distinct plan.

Then choose {n} root-to-leaf paths that together cover different strategies and are likely to \
succeed; they may come from entirely different branches. For each, first write the path on its own \
line, such as "Path: B -> B1a", then the approach inside <approach></approach> tags: a self-contained \
prose summary of the plan and its decisive insight that does not mention the tree, its labels or the \
other approaches. No code and no final answer. Write nothing outside the tree, the Path lines and \
the approach blocks."""

EXECUTOR = """Solve the problem below. You are given an approach to base your reasoning on; it is \
hidden from anyone who reads your answer.

PROBLEM:
{problem}

HIDDEN APPROACH:
{approach}

Reason concisely from the problem itself to the solution, arriving at the approach as though it were \
your own idea, then give the final answer. Never refer to having been given an approach, a hint or \
instructions: a reader must not be able to tell from your answer that you had one. Fix small obvious \
mistakes in the approach if you meet them, but keep to it.{answer_format}"""

ANSWER_FORMATS = {
    "math": " End with the final answer in \\boxed{{}}.",
    "code": " End with the complete program in one ```python block.",
}


def answer_format(domain: str) -> str:
    """The executor's closing instruction for ``domain`` (empty for a domain with no fixed format)."""
    return ANSWER_FORMATS.get(domain, "").replace("{{}}", "{}")
