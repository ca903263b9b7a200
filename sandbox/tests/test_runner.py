"""run_strategy, workers, services, the static pre-check, levels and the doctor."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ade_sandbox import (
    LEVELS,
    EntrySpec,
    IsolationUnavailable,
    Limits,
    Service,
    check_source,
    lsm,
    open_worker,
    probe,
    resolve_level,
    run_strategy,
)
from ade_sandbox.limits import level_rank

from sandbox_host import require_level

BIN = Path(sys.executable).parent

SELECTOR = """
import json

async def select(candidate_inventory, select_size, judge):
    scores = await judge([{"id": item["id"]} for item in candidate_inventory])
    ranked = sorted(zip(scores, candidate_inventory), key=lambda pair: -pair[0]["score"])
    return [item["id"] for _, item in ranked[:select_size]]
"""


def judge(requests):
    return [{"score": len(r["id"])} for r in requests]


def test_async_entry_with_inputs_args_and_a_service(tmp_path):
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps([{"id": "a"}, {"id": "bbb"}, {"id": "cc"}]))
    result = run_strategy(SELECTOR, "select", {"select_size": 2}, inputs={"candidate_inventory": inventory},
                          services=[Service("judge", judge)])  # fmt: skip
    assert result.status == "ok" and result.value == ["bbb", "cc"]
    (call,) = result.service_calls
    assert call.name == "judge" and call.ok and call.value == [{"score": 1}, {"score": 3}, {"score": 2}]
    assert result.isolation == probe().best_level and result.wall_s > 0 and result.peak_memory_mb > 0


def test_service_quota_and_validation_are_enforced():
    source = """
async def main(judge):
    outcome = []
    for request in (["ok"], ["x"] * 5, "not-a-list", ["ok"], ["ok"]):
        try:
            await judge(request)
            outcome.append("ok")
        except ServiceError as exc:
            outcome.append(str(exc))
    return outcome
"""
    service = Service("judge", lambda r: r, max_calls=4, max_items_per_call=3,
                      validate=lambda a: None if isinstance(a, list) else "expected a list")  # fmt: skip
    result = run_strategy(source, "main", services=[service])
    first, too_many, invalid, fourth, fifth = result.value
    assert first == "ok" and fourth == "ok"
    assert "at most 3 items" in too_many and "expected a list" in invalid and "quota of 4 calls" in fifth
    assert [c.ok for c in result.service_calls] == [True, False, False, True, False]


def test_failing_service_is_reported_to_the_strategy():
    source = "async def main(judge):\n    try:\n        await judge([1])\n    except ServiceError as e:\n"
    source += "        return str(e)\n"
    result = run_strategy(source, "main", services=[Service("judge", lambda r: 1 / 0)])
    assert "ZeroDivisionError" in result.value


def test_static_precheck_refuses_before_running():
    spec = EntrySpec("select", ("candidate_inventory", "select_size", "judge"), is_async=True)
    result = run_strategy("import os\nasync def select(candidate_inventory, select_size, judge=None):\n    return []\n",
                          "select", spec=spec, allowed_imports=["json"])  # fmt: skip
    assert result.status == "policy_violation"
    assert "line 1: import of 'os' is not allowed" in result.error and "default values" in result.error


def test_static_check_codes():
    spec = [EntrySpec("f", ("x",))]
    codes = lambda src, **kw: [v.code for v in check_source(src, spec, ["json"], **kw)]  # noqa: E731
    assert codes("def f(x):\n    return x\n") == []
    assert codes("import functools\n@functools.cache\ndef f(x):\n    return x\n") == ["import", "entry_point_decorated"]
    assert codes("def f(*x):\n    return x\n") == ["entry_point_signature"]
    assert codes("x = 1\n" * 100, max_source_bytes=50) == ["size"]
    assert codes("for i in range(3):\n    pass\ndef f(x):\n    return x\n") == ["top_level_statement"]


def test_worker_serves_many_calls_from_one_load():
    source = "LOADS = []\nLOADS.append(1)\ndef score(x):\n    return {'x': x * 2, 'loads': len(LOADS)}\n"
    with open_worker(source) as worker:
        results = [worker.call("score", {"x": i}) for i in range(200)]
    assert [r.value["x"] for r in results] == [i * 2 for i in range(200)]
    assert {r.value["loads"] for r in results} == {1}


def test_worker_per_call_timeout_kills_and_restart_recovers():
    source = "import time\ndef slow(s):\n    time.sleep(s)\n    return s\n"
    with open_worker(source, call_timeout_s=0.5) as worker:
        assert worker.call("slow", {"s": 0.01}).value == 0.01
        assert worker.call("slow", {"s": 5}).status == "timeout"
        dead = worker.call("slow", {"s": 0.01})
        assert dead.status == "crash" and "worker is not running" in dead.error and worker.dead
        worker.start()
        assert worker.call("slow", {"s": 0.01}).status == "ok"


def test_worker_total_wall_limit():
    source = "import time\ndef nap():\n    time.sleep(0.4)\n    return 1\n"
    with open_worker(source, limits=Limits(wall_s=1.0)) as worker:
        statuses = [worker.call("nap").status for _ in range(5)]
    assert statuses[:2] == ["ok", "ok"] and statuses[2] == "timeout" and statuses[3:] == ["crash", "crash"]


def test_worker_death_is_reported():
    source = "import os\ndef die():\n    os._exit(7)\ndef ok():\n    return 1\n"
    with open_worker(source) as worker:
        died = worker.call("die")
        assert died.status == "crash" and "code 7" in died.error
        assert worker.call("ok").status == "crash"
        worker.start()
        assert worker.call("ok").value == 1


def test_import_time_failure_is_an_exception_with_traceback():
    result = run_strategy("X = 1 / 0\ndef main():\n    return X\n", "main")
    assert result.status == "exception" and "ZeroDivisionError" in result.error
    assert 'File "strategy.py", line 1' in result.traceback


def test_missing_entry_point_is_bad_output():
    assert run_strategy("def other():\n    return 1\n", "main").status == "bad_output"


def test_minimum_isolation_is_enforced():
    with pytest.raises(IsolationUnavailable, match="below the required minimum 'namespaces'"):
        resolve_level("namespaces", level="process")
    best = probe().best_level
    assert resolve_level("process") == best
    if level_rank(best) < level_rank("strict"):
        with pytest.raises(IsolationUnavailable, match="missing: "):
            resolve_level("strict")


@pytest.mark.parametrize("level", LEVELS)
def test_each_available_level_reports_itself_and_enforces_its_layer(level, tmp_path):
    require_level(level)
    source = """
import socket
def main():
    out = {}
    try:
        open("/etc/hostname").read()
        out["etc"] = "read"
    except OSError:
        out["etc"] = "blocked"
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
        out["net"] = "connected"
    except OSError as exc:
        out["net"] = type(exc).__name__
    return out
"""
    result = run_strategy(source, "main", level=level)
    assert result.status == "ok" and result.isolation == level
    if level != "process":
        assert result.value["etc"] == "blocked"
    if level in ("process+lsm", "strict") or (level == "namespaces" and lsm.seccomp_available()):
        assert result.value["net"] == "PermissionError"  # seccomp refuses inet sockets
    elif level == "namespaces":
        assert result.value["net"] in ("OSError", "ConnectionRefusedError")  # empty network namespace


def test_doctor_reports_the_layers_truthfully():
    report = probe()
    assert report.layer("namespaces").available == (
        shutil.which("bwrap") is not None and report.layer("namespaces").available
    )
    if shutil.which("bwrap") is None:
        assert not report.layer("namespaces").available
    assert report.layer("landlock").available <= (lsm.landlock_abi() > 0)
    assert report.layer("seccomp").available <= lsm.seccomp_available()
    cli = subprocess.run([str(BIN / "ade-sandbox"), "doctor", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout) == report.to_json()
    text = subprocess.run([str(BIN / "ade"), "sandbox", "doctor"], capture_output=True, text=True, check=True).stdout
    assert f"best isolation level: {report.best_level}" in text
    for level in report.levels:  # every level says what it enforces here and what it does not
        assert f"level {level.level} (" in text
        assert all(f"enforced      {item}" in text for item in level.enforced)
        assert all(f"not enforced  {item}" in text for item in level.not_enforced)
    assert not report.level("process").usable or "scratch is a host directory" in text


def test_cli_run_json(tmp_path):
    (tmp_path / "s.py").write_text("def pick(inventory, size):\n    return [x['id'] for x in inventory[:size]]\n")
    (tmp_path / "inv.json").write_text(json.dumps([{"id": "a"}, {"id": "b"}, {"id": "c"}]))
    (tmp_path / "args.json").write_text(json.dumps({"size": 2}))
    cmd = [str(BIN / "ade-sandbox"), "run", str(tmp_path / "s.py"), "--entrypoint", "pick", "--json",
           "--args-json", str(tmp_path / "args.json"), "--input", f"inventory={tmp_path / 'inv.json'}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["status"] == "ok" and data["value"] == ["a", "b"]
    assert data["isolation"] == probe().best_level


def test_cli_policy_violation_and_bad_input(tmp_path):
    (tmp_path / "s.py").write_text("import os\ndef f():\n    return 1\n")
    proc = subprocess.run([str(BIN / "ade"), "sandbox", "run", str(tmp_path / "s.py"), "--entrypoint", "f",
                           "--allow-import", "json", "--json"], capture_output=True, text=True)  # fmt: skip
    assert json.loads(proc.stdout)["status"] == "policy_violation"
    missing = subprocess.run([str(BIN / "ade-sandbox"), "run", str(tmp_path / "nope.py"), "--entrypoint", "f"],
                             capture_output=True, text=True)  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.startswith("SandboxError: strategy file not found")
    ok = subprocess.run([str(BIN / "ade-sandbox"), "run", str(tmp_path / "s.py"), "--entrypoint", "f", "--timeout",
                         "10"], capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0 and "status: ok" in ok.stdout


def test_spawn_is_fresh_per_run():
    source = (
        "import os\nSTATE = []\ndef main():\n    STATE.append(1)\n    return [len(STATE), sorted(os.listdir('.'))]\n"
    )
    first, second = run_strategy(source, "main"), run_strategy(source, "main")
    assert first.value == second.value == [1, []]
    assert time.monotonic() > 0
