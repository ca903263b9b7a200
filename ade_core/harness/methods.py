"""Research-method variants (paper Sec 4.3, App. D.6): what each method calls, shows and records.

Every method keeps the strategy interface, admission, binding and the Engine; they differ in which
roles are called, what the Coordinator sees, and who writes the memory records:

- ``full``: all six roles; Plan Memory by the Plan Summarizer, Run Memory by the Run Summarizer.
- ``unified``: one session (Coordinator, Builder and Analyzer answered by one endpoint) plans,
  builds and analyzes; no Review Worker or Summarizers; the Coordinator sees its own notes (its
  earlier rationales and analyses) instead of Run Memory.
- ``independent``: full roles, but every Plan is a ``new`` Plan proposed without Run Memory,
  catalog or ranking: no finding of one candidate reaches another.
- ``outcome_only``: Coordinator and Builder only; the Coordinator sees candidate history, scalar
  scores and execution facts (deterministic outcome records in Run Memory).
- ``raw_evidence``: as ``outcome_only``, plus the accepted Experiment Packages (the bootstrap
  baseline included) in the Coordinator's view.

Where no Summarizer runs, the Harness writes each terminal Trial's Plan- and Run-Memory versions
as deterministic outcome records, so a Trial still completes with exactly one update of each (the
queue and completion rules are unchanged); only in ``full`` and ``independent`` are they
model-generated research summaries.
"""

from __future__ import annotations

from dataclasses import dataclass

from ade_core.schemas.config import ExperimentConfig, ResearchMethod


@dataclass(frozen=True)
class MethodPolicy:
    """What one research method calls, shows and records."""

    method: ResearchMethod
    review: bool  # Analyzer review design + Review Worker
    analysis: bool  # Analyzer interpretation
    summarizers: bool  # Plan and Run Summarizers (else deterministic outcome records)
    run_memory_visible: bool  # the Coordinator sees Run Memory
    shared_catalog: bool  # the Coordinator sees other Plans (catalog, ranking)
    packages_visible: bool  # the Coordinator sees accepted Experiment Packages
    session_notes: bool  # the Coordinator sees its own earlier rationales and analyses
    relations: tuple[str, ...]  # Plan relations the Coordinator may propose
    one_session: bool  # Builder and Analyzer are answered by the Coordinator's endpoint

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles this method calls."""
        roles = ["coordinator", "builder"]
        if self.analysis or self.review:
            roles.append("analyzer")
        if self.review:
            roles.append("review_worker")
        if self.summarizers:
            roles += ["plan_summarizer", "run_summarizer"]
        return tuple(roles)


ALL_RELATIONS = ("new", "revisit", "contradict", "combine")

POLICIES: dict[str, MethodPolicy] = {
    "full": MethodPolicy("full", True, True, True, True, True, False, False, ALL_RELATIONS, False),
    "unified": MethodPolicy("unified", False, True, False, False, True, False, True, ALL_RELATIONS, True),
    "independent": MethodPolicy("independent", True, True, True, False, False, False, False, ("new",), False),
    "outcome_only": MethodPolicy("outcome_only", False, False, False, True, True, False, False, ALL_RELATIONS, False),
    "raw_evidence": MethodPolicy("raw_evidence", False, False, False, True, True, True, False, ALL_RELATIONS, False),
}


def method_policy(config: ExperimentConfig) -> MethodPolicy:
    """The policy of the run's ``[research].method``."""
    return POLICIES[config.research.method]
