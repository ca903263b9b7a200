"""Reading planning replies: Verbalized Sampling lists, Groot trees and their paths, and leaks."""

from __future__ import annotations

import random

import pytest

from ade_core.sampling.leakage import leak
from ade_core.sampling.plans import choose_paths, leaves, parent_label, read_groot, read_tree, read_verbalized, route

TREE = """<tree>
A. Sort the whole array
A1. Sorting order
A1a. Ascending, index k-1
A1b. Descending, index n-k
B. Bounded heap
B1a. Max-heap of the k smallest
B1b. Min-heap of everything
C. Quickselect
</tree>
"""


def groot(*paths: tuple[str, str]) -> str:
    return TREE + "".join(f"Path: {path}\n<approach>{body}</approach>\n" for path, body in paths)


def test_a_verbalized_list_with_probabilities_in_every_form():
    text = (
        "<approach>Probability: 0.4\nSort, then index.</approach>\n"
        "<approach>**Probability:** 35%\nKeep a heap.</approach>\n"
        "<approach>Probability: 7\nQuickselect.</approach>\n"  # not a probability: kept without one
        "<approach>Binary search on the value."  # never closed
    )
    reading = read_verbalized(text, 4)
    assert reading.status == "ok" and reading.raw == text
    assert [(a.text, a.probability) for a in reading.approaches] == [
        ("Sort, then index.", 0.4),
        ("Keep a heap.", 0.35),
        ("Quickselect.", None),
        ("Binary search on the value.", None),
    ]
    assert [a.text for a in read_verbalized(text, 2).approaches] == ["Sort, then index.", "Keep a heap."]


@pytest.mark.parametrize(
    ("text", "status", "reason"),
    [
        ("1. sort 2. heap", "malformed", "no <approach> blocks"),
        ("<approach>Probability: 0.5\n</approach>", "malformed", "no usable approaches"),
        ("<approach>only one</approach>", "shortfall", "1 usable approaches of the 3 asked for"),
    ],
)
def test_malformed_and_short_lists_are_outcomes_with_the_raw_text(text, status, reason):
    reading = read_verbalized(text, 3)
    assert (reading.status, reading.reason, reading.raw) == (status, reason, text)
    assert reading.usable == (status != "malformed")


def test_tree_labels_nest_by_their_last_run_and_a_skipped_level_is_tolerated():
    assert [parent_label(x) for x in ("A", "A1", "A1a", "A1a2", "B12b")] == [None, "A", "A1", "A1a", "B12"]
    nodes = read_tree(TREE)
    assert list(nodes) == ["A", "A1", "A1a", "A1b", "B", "B1a", "B1b", "C"]
    assert leaves(nodes) == {"A1a", "A1b", "B1a", "B1b", "C"}
    assert route("B1a", nodes) == ("B", "B1a")  # B1 is not written: B1a hangs under B
    assert route("A1b", nodes) == ("A", "A1", "A1b") and route("Z", nodes) is None
    assert read_tree("A. outside any tree") == {}
    assert "A" not in read_tree("<tree>\nA heap would do\nB. Heap\n</tree>")  # the word "A" is not a label


def test_groot_keeps_distinct_root_to_leaf_paths_and_says_why_it_dropped_the_rest():
    text = groot(
        ("A -> A1 -> A1a", "Sort ascending."),
        ("B -> B1a", "A max-heap."),
        ("A1a", "Sort again."),  # the same route as the first
        ("A -> A1", "Sort somehow."),  # not a leaf
        ("D", "Something else."),  # not in the tree
        ("A -> B1b", "Mixed."),  # labels off the route
        ("C", "Quickselect."),
    )
    reading = read_groot(text, 3)
    assert reading.status == "ok"
    assert [(a.path, a.text) for a in reading.approaches] == [
        (("A", "A1", "A1a"), "Sort ascending."),
        (("B", "B1a"), "A max-heap."),
        (("C",), "Quickselect."),
    ]
    assert len(reading.dropped) == 4 and "not a leaf" in " ".join(reading.dropped)
    short = read_groot(groot(("C", "Quickselect."), ("C", "Again.")), 2)
    assert (short.status, short.reason) == ("shortfall", "1 usable distinct root-to-leaf paths of the 2 asked for")
    assert read_groot("<approach>x</approach>", 2).reason == "no <tree> block"
    assert read_groot("<tree>just prose</tree><approach>x</approach>", 2).reason == (
        "no labelled decisions in the <tree> block"
    )
    assert read_groot(TREE + "Path: C", 1).reason == "no <approach> blocks after the tree"
    no_path = read_groot(TREE + "<approach>x</approach>", 1)
    assert no_path.status == "malformed" and no_path.dropped == ("an approach without a Path: line",)


def test_path_selection_never_returns_two_paths_with_the_same_route():
    rng = random.Random(7)
    for _ in range(300):
        nodes: dict[str, str] = {}
        for root in "ABCD"[: rng.randint(1, 4)]:
            nodes[root] = "s"
            for i in range(1, rng.randint(1, 3)):
                nodes[f"{root}{i}"] = "d"
                for letter in "abc"[: rng.randint(0, 3)]:
                    nodes[f"{root}{i}{letter}"] = "o"
        labels = list(nodes) + ["Z9"]
        named = [" -> ".join(rng.sample(labels, rng.randint(1, min(3, len(labels))))) for _ in range(rng.randint(1, 8))]
        routes, dropped = choose_paths(nodes, named)
        kept = [r for r in routes if r is not None]
        assert len(kept) + len(dropped) == len(named)
        assert len({r[-1] for r in kept}) == len(kept)  # distinct leaves: every pair diverges somewhere
        assert all(r[-1] in leaves(nodes) and route(r[-1], nodes) == r for r in kept)


@pytest.mark.parametrize(
    "text",
    [
        "Following the given approach, sort the array.",
        "Based on the hint, the answer is 3.",
        "The approach I was given uses a heap.",
        "As instructed, I will use a heap.",
        "The plan provided to me says to sort.",
        "Using the hidden approach we get 4.",
        "Path: B -> B1a\nThen sort.",
        "<approach>sort</approach>",
    ],
)
def test_a_response_that_refers_to_its_approach_is_a_leak(text):
    assert leak(text)


@pytest.mark.parametrize(
    "text",
    ["This approach works because the array is small.", "A different strategy: binary search.", "Let me plan: sort."],
)
def test_ordinary_talk_of_approaches_is_not_a_leak(text):
    assert leak(text) is None
