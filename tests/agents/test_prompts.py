"""Prompts hold a role's instructions, its task's additions and its view — and nothing else."""

from __future__ import annotations

import json
import re

import pytest

from ade_core.agents import make_backend
from ade_core.agents.contract import Refusal, envelope_schema, extract_json, read_reply
from ade_core.agents.prompting import PROMPTS_DIR, instructions, render_messages
from ade_core.config import load_config
from ade_core.harness.roles import AgentReply
from ade_core.harness.run import drive_run, init_run
from ade_core.harness.scripted import ScriptedBackend
from ade_core.plugins import load_plugins
from ade_core.schemas.views import View
from ade_core.specs import ROLES

from conftest import CONFIG, openai_config

BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


class Recorder(ScriptedBackend):
    """The scripted policy, keeping every view it answered."""

    def __init__(self) -> None:
        super().__init__()
        self.views: list[View] = []

    async def deliver(self, role: str, view: View) -> AgentReply:
        self.views.append(view)
        return await super().deliver(role, view)


@pytest.fixture(scope="module")
def views(tmp_path_factory) -> list[View]:
    recorder = Recorder()
    run_dir = tmp_path_factory.mktemp("views") / "run"
    init_run(run_dir, load_config(CONFIG, ["budget.plans_per_coordinator=1"]), dry_run=True)
    drive_run(run_dir, backend=recorder)
    return recorder.views


def test_every_role_has_its_own_instruction_file():
    shared = (PROMPTS_DIR / "shared.md").read_text().strip()
    texts = {role: instructions(role) for role in ROLES}
    for role, text in texts.items():
        assert text.startswith(shared) and (PROMPTS_DIR / f"{role}.md").read_text().strip() in text
    assert len(set(texts.values())) == len(ROLES)
    with pytest.raises(ValueError, match="unknown role 'planner'"):
        instructions("planner")


def test_a_prompt_is_the_instructions_the_view_and_the_reply_schema_only(views):
    assert {v.role for v in views} == set(ROLES)
    boilerplate = set()
    for view in views:
        system, user = render_messages(view, ["Prefer short selectors."])
        assert system["content"] == instructions(view.role) + (
            "\n## Task-specific instructions\n\nPrefer short selectors.\n"
        )
        shown_view, shown_schema = (json.loads(b) for b in BLOCK.findall(user["content"]))
        assert shown_view == view.model_dump(mode="json")
        assert shown_schema == envelope_schema(view)
        boilerplate.add(BLOCK.sub("<json>", user["content"]))
    assert len(boilerplate) == 1  # besides the two JSON blocks, every prompt says the same words


def test_the_analyzer_prompt_never_names_the_plan(views):
    analyzer = [v for v in views if v.role == "analyzer"]
    assert {v.stage for v in analyzer} == {"design", "interpret"}
    for view in analyzer:
        _, user = render_messages(view)
        for forbidden in ('"hypothesis"', '"mechanism"', '"plan_memory"', '"run_memory"', '"account"'):
            assert forbidden not in user["content"]


def test_replies_are_read_leniently_and_checked_strictly(views):
    view = next(v for v in views if v.role == "review_worker")
    delivery = ScriptedBackend().review_worker(view).model_dump(mode="json")
    envelope = {"role": view.role, "subject": view.subject, "basis_revision": view.basis_revision}
    text = json.dumps({**envelope, "delivery": delivery})
    assert extract_json(f"<think>hmm {{</think>\n```json\n{text}\n```") == json.loads(text)
    # think tags inside the delivery (a strategy that checks think spans) are content, not reasoning
    source = {"source": 'OPEN, CLOSE = "<think>", "</think>"\nSPANS = [OPEN, CLOSE]'}
    assert extract_json(json.dumps(source)) == source
    assert extract_json("<think>first</think>" + json.dumps(source)) == source
    assert read_reply(f"Sure:\n{text}\nAnything else?", view) == ScriptedBackend().review_worker(view)
    refused = read_reply(json.dumps({**envelope, "delivery": {"judgments": [{"request": -1}]}}), view)
    assert isinstance(refused, Refusal)
    assert refused.feedback == [
        "delivery.judgments.0.request: Input should be greater than or equal to 0 (got -1)",
        "delivery.judgments.0.record_id: required field is missing; add it",
        "delivery.judgments.0.verdict: required field is missing; add it",
    ]
    cut = read_reply(text[:50], view, truncated=True)
    assert isinstance(cut, Refusal) and "cut off at the completion token limit" in cut.feedback[0]


def test_json_feedback_points_at_the_mistake_inside_a_code_fence(views):
    view = next(v for v in views if v.role == "review_worker")
    broken = '{"role": "review_worker", "subject": "x",, "basis_revision": 1}'
    reply = f"Here is my delivery:\n```json\n{broken}\n```\nDone."
    refused = read_reply(reply, view)
    assert isinstance(refused, Refusal)
    (said,) = refused.feedback
    # not "at character 0" (the fence's backticks), but the doubled comma on the JSON's line
    where = reply.index(",,") + 1
    assert f"at line 3 column {where - reply.index(broken) + 1}, character {where}" in said
    assert "near '" in said and '"x",,' in said


ADDITION = """
from ade_core import PromptAddition, hookimpl

@hookimpl
def ade_prompt_additions(task, role):
    if task == "data_selection" and role == "builder":
        return [PromptAddition(role="builder", text="ADDED-BY-PLUGIN: keep every domain.")]
    return []
"""


def test_task_prompt_additions_reach_only_their_role(install_fake_plugin, chat_server, tmp_path):
    install_fake_plugin("ade-prompt-extra", "ade_prompt_extra", ADDITION)
    registry = load_plugins()
    loaded = openai_config("http://127.0.0.1:9/v1")
    backend = make_backend(loaded.operational, registry.task("data_selection"))
    assert backend.backends["builder"].additions == {  # type: ignore[attr-defined]
        "builder": ("ADDED-BY-PLUGIN: keep every domain.",),
        **{role: () for role in ROLES if role != "builder"},
    }
    server = chat_server()
    run_dir = tmp_path / "run"
    init_run(run_dir, openai_config(server.url), dry_run=True, registry=registry)
    assert drive_run(run_dir, registry=registry) == "completed"
    for request in server.state.received:
        if request.role is not None:
            system = request.body["messages"][0]["content"]
            assert ("ADDED-BY-PLUGIN" in system) == (request.role == "builder")


def test_reply_strings_are_bounded_in_the_schema_and_when_read(views):
    view = next(v for v in views if v.role == "review_worker")
    delivery = ScriptedBackend().review_worker(view).model_dump(mode="json")
    judgment = {**delivery["judgments"][0], "note": "x" * 8001}
    envelope = {"role": view.role, "subject": view.subject, "basis_revision": view.basis_revision}
    refused = read_reply(json.dumps({**envelope, "delivery": {"judgments": [judgment]}}), view)
    assert isinstance(refused, Refusal)
    assert refused.feedback[0].startswith("delivery.judgments.0.note: String should have at most 8000 characters")
    assert '"maxLength": 8000' in json.dumps(envelope_schema(view))
