"""`[agents]` / `[review]`: where they live, per-role resolution, errors, and `ade run --agent`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ade_core.agents import role_endpoints
from ade_core.config import load_config
from ade_core.errors import ConfigError
from ade_core.testing import run_command

from conftest import CONFIG

ADE = str(Path(sys.executable).with_name("ade"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(f'extends = "{CONFIG}"\n{text}')
    return path


def test_top_level_agents_and_review_are_operational_and_not_digested(tmp_path):
    plain = load_config(CONFIG)
    path = write(
        tmp_path,
        """
[agents]
backend = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "qwen"
temperature = 0.6

[agents.roles.builder]
model = "qwen-coder"
max_tokens = 8192

[review]
endpoint = "http://127.0.0.1:8001/v1"
""",
    )
    loaded = load_config(path)
    assert loaded.digest == plain.digest  # 𝓑 is unchanged: agents are operational
    roles = role_endpoints(loaded.operational)
    assert roles["coordinator"].model == "qwen" and roles["coordinator"].temperature == 0.6
    assert roles["builder"].model == "qwen-coder" and roles["builder"].max_tokens == 8192
    assert roles["builder"].temperature == 0.6  # inherited
    review = roles["review_worker"]
    assert (review.base_url, review.model, review.temperature) == ("http://127.0.0.1:8001/v1", None, 0.0)
    assert (review.max_concurrency, review.attempts, review.max_tokens) == (128, 3, 4096)  # paper App. D


def test_set_reaches_agents_over_operational_agents():
    loaded = load_config(CONFIG, ["agents.base_url=http://127.0.0.1:9/v1", "agents.backend='openai'"])
    assert loaded.operational.agents.base_url == "http://127.0.0.1:9/v1"
    assert loaded.operational.agents.backend == "openai"
    again = load_config(CONFIG, ["operational.agents.model='m'"])
    assert again.operational.agents.model == "m"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[agents.roles.review_worker]\nmodel = 'x'\n", "configured under [review]"),
        ("[agents.roles.planner]\nmodel = 'x'\n", "roles.planner"),
        ("[agents]\nbackend = 'anthropic'\n", "[operational.agents].backend: Input should be 'offline' or 'openai'"),
        ("[agents]\nmodle = 'x'\n", "did you mean 'model'"),
        ("[review]\nconcurrency = 0\n", "[operational.review].concurrency"),
    ],
)
def test_bad_agent_settings_name_the_key_and_the_fix(tmp_path, text, message):
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert message in str(caught.value)


def test_ade_run_agent_openai_completes_against_the_server_and_status_shows_its_tokens(chat_server, tmp_path):
    server = chat_server(response_format=False)
    run_dir = tmp_path / "run"
    args = ["--set", "budget.plans_per_coordinator=1", "--set", "agents.backoff_s=0.01"]
    proc = run_command(
        [ADE, "run", str(CONFIG), "--dry-run", "--agent", "openai", "--set", f"agents.base_url={server.url}", *args,
         "--run-dir", str(run_dir)],
        idle_s=10,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "phase completed" in proc.stdout
    status = json.loads(run_command([ADE, "status", str(run_dir), "--json"], idle_s=10).stdout)
    assert status["agents"]["tokens_total"] == server.state.tokens_reported > 0
    text = run_command([ADE, "status", str(run_dir)], idle_s=10).stdout
    assert f"agent tokens {server.state.tokens_reported}" in text
    settings = json.loads((run_dir / "run.json").read_text())["operational"]["agents"]
    assert settings["backend"] == "openai" and settings["base_url"] == server.url  # a resume uses them too


def test_ade_run_refuses_the_openai_api_without_a_key_before_starting(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = run_command(
        [ADE, "run", str(CONFIG), "--dry-run", "--agent", "openai", "--run-dir", str(tmp_path / "run")],
        idle_s=10, env=env,
    )  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "$OPENAI_API_KEY is not set" in proc.stderr and not (tmp_path / "run").exists()
