"""Held-out data never reaches a prompt; the agents package never reads the held-out suite; real-run concurrency."""

from __future__ import annotations

import ast
import asyncio
import json
import uuid
from pathlib import Path

from test_prompts import Recorder

from ade_core.agents.openai_backend import OpenAIBackend
from ade_core.config import load_config
from ade_core.harness.run import drive_run, init_run
from ade_core.harness.scripted import ScriptedBackend
from ade_core.schemas.config import AgentEndpoint

from conftest import CONFIG, dry_run

AGENTS = Path(__file__).resolve().parents[2] / "ade_core" / "agents"


def test_no_request_carries_a_heldout_canary(chat_server, tmp_path):
    canary, bench = f"CANARY-{uuid.uuid4().hex}", f"heldbench_{uuid.uuid4().hex[:10]}"
    rows = [{"id": f"h{i}", "problem": f"{canary} What is {i}+2?", "answer": str(i + 2)} for i in range(6)]
    (tmp_path / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "config.toml").write_text(
        f'extends = "{CONFIG}"\n[[evaluation.held_out]]\nname = "{bench}"\nsource = "heldout.jsonl"\nk = 3\n'
    )
    server = chat_server()
    loaded = load_config(tmp_path / "config.toml", [f"agents.base_url='{server.url}'", "agents.backend='openai'"])
    assert [b.name for b in loaded.experiment.evaluation.held_out] == [bench]
    status = dry_run(tmp_path / "run", loaded)
    assert status["phase"] == "completed" and len(server.state.received) > 20
    for request in server.state.received:
        assert canary not in request.text and bench not in request.text and "heldout.jsonl" not in request.text


def test_the_agents_package_never_reads_the_heldout_suite():
    for path in AGENTS.glob("*.py"):
        tree = ast.parse(path.read_text())
        assert "held_out" not in [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)], path.name
        imports = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in imports if "heldout" in m], path.name


def test_outside_a_dry_run_requests_run_concurrently_up_to_max_concurrency(chat_server, tmp_path):
    recorder = Recorder()
    run_dir = tmp_path / "run"
    init_run(run_dir, load_config(CONFIG, ["budget.plans_per_coordinator=1"]), dry_run=True)
    drive_run(run_dir, backend=recorder)
    views = [v for v in recorder.views if v.role == "review_worker"] * 3
    server = chat_server(delay_s=0.3)
    endpoint = AgentEndpoint(backend="openai", base_url=server.url, max_concurrency=2, timeout_s=10)
    backend = OpenAIBackend({"review_worker": endpoint})

    async def ask_all():
        return await asyncio.gather(*(backend.deliver("review_worker", v) for v in views))

    replies = asyncio.run(ask_all())
    assert [r.delivery for r in replies] == [ScriptedBackend().review_worker(v) for v in views]
    assert server.state.max_in_flight == 2 and len(views) >= 4
    assert sum(r.tokens for r in replies) == server.state.tokens_reported
