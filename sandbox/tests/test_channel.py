"""The channel between harness and strategy, attacked from the strategy's side.

Writes that cannot hang the harness, one service ledger per run, strict and bounded decoding of
whatever the child sends, and accounting the child cannot forge. Many cases write raw frames:
the control and message descriptors are inherited by user code (``sys.argv`` names them), so
nothing the bootstrap does on the child's side is a boundary. Each case asserts the typed
outcome; the ``host`` fixture checks that no process of the strategy survives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ade_sandbox import Limits, SandboxError, Service, open_worker, run_strategy
from ade_sandbox.services import REFUSALS_BEFORE_STOP, STORED_REFUSALS

from sandbox_host import require_level

FAST = Limits(wall_s=5, cpu_s=3, memory_mb=256, max_output_bytes=64 << 10, max_result_bytes=1 << 20)

# Raw access to the channel, as any strategy has it.
RAW = """
import json, os, struct, sys
CONTROL, MESSAGES = int(sys.argv[1]), int(sys.argv[2])

def put(message):
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        view = view[os.write(MESSAGES, view):]

def get():
    def exact(size):
        data = b""
        while len(data) < size:
            chunk = os.read(CONTROL, size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data
    (size,) = struct.unpack(">I", exact(4))
    return json.loads(exact(size))
"""


def strategy(body: str) -> str:
    return RAW + textwrap.dedent(body)


def within(seconds: float, action: Callable[[], Any]) -> Any:
    """``action()``, failing the test if the harness is still blocked after ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the harness was still blocked after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# --- 1. the parent's writes cannot hang it ------------------------------------------------
def test_strategy_that_never_reads_its_service_answers_is_a_timeout(host):
    source = strategy(
        """
        import time
        def main(judge):
            for _ in range(64):  # requests written directly, answers never read
                put({"type": "service", "name": "judge", "args": [0]})
            time.sleep(60)
        """
    )
    judge = Service("judge", lambda requests: ["x" * (256 << 10)])
    limits = Limits(wall_s=1, cpu_s=1, memory_mb=256)
    result = within(20, lambda: run_strategy(source, "main", services=[judge], limits=limits))
    assert result.status == "timeout"


def test_strategy_that_stops_reading_its_calls_is_a_timeout(host):
    source = strategy(
        """
        import time
        def first():
            put({"type": "result", "id": 1, "kind": "ok", "value": "forged"})
            time.sleep(60)  # the main thread never reads the control pipe again
        """
    )
    with open_worker(source, limits=Limits(wall_s=30, cpu_s=5), call_timeout_s=1) as worker:
        assert worker.call("first").value == "forged"
        result = within(20, lambda: worker.call("first", {"blob": "x" * (1 << 20)}))
    assert result.status == "timeout"


def test_parent_reads_output_while_it_writes_so_neither_side_waits(host):
    # The child fills stdout before it reads a 1 MiB call: both pipes are full unless the parent
    # keeps reading while it writes.
    source = strategy(
        """
        import sys
        def first():
            put({"type": "result", "id": 1, "kind": "ok", "value": "forged"})
            sys.stdout.write("y" * 300_000)
            sys.stdout.flush()
            request = get()
            put({"type": "result", "id": request["id"], "kind": "ok", "value": len(request["args"]["blob"])})
            while get()["type"] != "shutdown":
                pass
            os._exit(0)
        """
    )
    limits = Limits(wall_s=30, cpu_s=10, max_output_bytes=1 << 20)
    with open_worker(source, limits=limits, call_timeout_s=10) as worker:
        assert worker.call("first").value == "forged"
        result = within(20, lambda: worker.call("second", {"blob": "x" * (1 << 20)}))
    assert (result.status, result.value) == ("ok", 1 << 20)
    assert len(result.stdout) == 300_000


# --- 2. one ledger per run ------------------------------------------------------------------
CALL_JUDGE = """
async def main(judge):
    try:
        return await judge([1])
    except ServiceError as exc:
        return str(exc)
"""


def test_calls_made_while_loading_are_recorded_and_spend_the_quota(host):
    source = strategy(
        """
        LOADED = []
        for _ in range(3):
            put({"type": "service", "name": "judge", "args": [0]})
            LOADED.append(get()["ok"])

        async def main(judge):
            try:
                await judge([1])
                return [LOADED, "answered"]
            except ServiceError as exc:
                return [LOADED, str(exc)]
        """
    )
    judge = Service("judge", lambda requests: requests, max_calls=3)
    with open_worker(source, services=[judge], limits=FAST) as worker:
        assert [(c.args, c.ok) for c in worker.load_service_calls] == [([0], True)] * 3
        result = worker.call("main")
    loaded, answer = result.value
    assert loaded == [True, True, True] and "quota of 3 calls per run" in answer
    assert [c.ok for c in result.service_calls] == [False] and result.refused_calls == 1


def test_quota_is_per_run_across_calls_and_restarts(host):
    judge = Service("judge", lambda requests: requests, max_calls=2)
    with open_worker(CALL_JUDGE, services=[judge], limits=FAST) as worker:
        answers = [worker.call("main").value, worker.call("main").value]
        worker.start()  # a restart is the same run: no fresh quota
        answers.append(worker.call("main").value)
    assert answers[:2] == [[1], [1]] and "quota of 2 calls per run" in answers[2]


def test_arguments_are_counted_by_the_declared_shape(host):
    seen: list[Any] = []

    def judge(requests: list[Any]) -> list[int]:
        seen.append(requests)
        return [0 for _ in requests]

    source = """
    async def main(judge, lookup, echo):
        outcome = []
        for service, args in (
            (judge, "x" * 100_000),
            (judge, {str(i): i for i in range(100_000)}),
            (lookup, {str(i): i for i in range(1_000)}),
            (lookup, [1, 2]),
            (echo, [1, 2, 3, 4]),
            (lookup, {"a": 1}),
            (judge, [1, 2]),
            (echo, "any JSON value"),
        ):
            try:
                await service(args)
                outcome.append("ok")
            except ServiceError as exc:
                outcome.append(str(exc))
        return outcome
    """
    services = [
        Service("judge", judge, max_items_per_call=256),
        Service("lookup", lambda query: {"keys": len(query)}, max_items_per_call=256, takes="object"),
        Service("echo", lambda value: value, max_items_per_call=3, takes="any"),
    ]
    result = run_strategy(textwrap.dedent(source), "main", services=services, limits=Limits(wall_s=10))
    string, mapping, wide, listed, long_any, *fine = result.value
    assert "expected a list of requests, got a JSON string" in string
    assert "expected a list of requests, got a JSON object" in mapping
    assert "at most 256 items per call, got 1000" in wide
    assert "expected a JSON object, got a JSON list" in listed
    assert "at most 3 items per call, got 4" in long_any
    assert fine == ["ok", "ok", "ok"] and seen == [[1, 2]]
    with pytest.raises(SandboxError, match="takes must be one of"):
        Service("judge", judge, takes="tuple")  # type: ignore[arg-type]  # an invalid value on purpose: the test expects the refusal


def test_refused_calls_are_counted_not_stored_and_a_flood_is_stopped(host):
    source = """
    async def main(judge):
        refused = 0
        for _ in range(20_000):
            try:
                await judge("not a list")
            except ServiceError:
                refused += 1
        return refused
    """
    result = run_strategy(textwrap.dedent(source), "main", services=[Service("judge", len)], limits=FAST)
    assert result.status == "policy_violation" and "refused service calls" in result.error
    assert result.refused_calls == REFUSALS_BEFORE_STOP and len(result.service_calls) == STORED_REFUSALS


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        (Service("judge", lambda r: r, validate=lambda args: str(1 / 0)), "the validator failed: ZeroDivisionError"),
        (Service("judge", lambda r: [float("nan")]), "not strict JSON"),
        (Service("judge", lambda r: {1, 2}), "not strict JSON"),
        (Service("judge", lambda r: r[5]), "failed: IndexError"),
    ],
    ids=["validator-raises", "nan-answer", "set-answer", "handler-raises"],
)
def test_failing_validator_or_handler_is_a_service_error_and_the_worker_lives(host, service, expected):
    with open_worker(CALL_JUDGE, services=[service], limits=FAST) as worker:
        results = [worker.call("main"), worker.call("main")]
    assert [r.status for r in results] == ["ok", "ok"]
    assert expected in results[0].value and not results[0].service_calls[0].ok


# --- 3. the parent decodes strictly and within bounds -------------------------------------
FORGED = """
def main():
    put(b'{"type": "result", "id": 1, "kind": "ok", "value": %s}')
    while get()["type"] != "shutdown":
        pass
    os._exit(0)
"""


@pytest.mark.parametrize(
    "value",
    [
        "1e999",  # decodes to infinity
        '"\\\\ud800"',  # a lone surrogate
        '"\\\\udc00\\\\ud800"',  # a pair in the wrong order
        "[" * 100_000 + "]" * 100_000,  # 100,000 deep: a RecursionError in a plain decoder
        "Infinity",
    ],
    ids=["huge-float", "lone-surrogate", "reversed-pair", "deep", "constant"],
)
def test_forged_non_strict_frame_is_bad_output(host, value):
    result = run_strategy(strategy(FORGED % value), "main", limits=FAST)
    assert result.status == "bad_output"


def test_surrogate_pair_and_escaped_backslash_are_delivered(host):
    value = '["\\\\ud83d\\\\ude00", "\\\\\\\\ud800"]'  # an emoji; a backslash followed by the text ud800
    result = run_strategy(strategy(FORGED % value), "main", limits=FAST)
    assert (result.status, result.value) == ("ok", ["\U0001f600", "\\ud800"])


def test_result_depth_is_bounded(host):
    source = "def main(depth):\n    value = 0\n    for _ in range(depth):\n        value = [value]\n    return value\n"
    limits = Limits(wall_s=5, max_result_depth=20)
    assert run_strategy(source, "main", {"depth": 20}, limits=limits).status == "ok"
    deep = run_strategy(source, "main", {"depth": 21}, limits=limits)
    assert deep.status == "bad_output" and "deeper than the limit of 20" in deep.error


def test_result_items_are_bounded(host):
    source = "def main(n):\n    return [0] * n\n"
    limits = Limits(wall_s=5, max_result_items=10_000)
    assert run_strategy(source, "main", {"n": 9_000}, limits=limits).value == [0] * 9_000
    wide = run_strategy(source, "main", {"n": 11_000}, limits=limits)
    assert wide.status == "bad_output" and "more than the limit of 10000" in wide.error


def test_inflating_frame_is_refused_before_it_is_decoded(host):
    # 8 MiB of empty objects would be 2.8 million dicts in the harness.
    source = strategy(
        """
        import time
        def main():
            items = b",".join([b"{}"] * ((8 << 20) // 3))
            put(b'{"type": "result", "id": 1, "kind": "ok", "value": [' + items + b']}')
            time.sleep(60)
        """
    )
    result = run_strategy(source, "main", limits=Limits(wall_s=10, max_result_bytes=16 << 20))
    assert result.status == "bad_output" and "JSON values" in result.error


def test_decode_limits_are_validated():
    for name in ("max_result_depth", "max_result_items"):
        with pytest.raises(SandboxError, match=f"limit {name} must be > 0"):
            Limits(**{name: 0})


def test_cli_reports_a_deep_frame_as_bad_output(tmp_path):
    (tmp_path / "s.py").write_text(strategy(FORGED % ("[" * 100_000 + "]" * 100_000)))
    cli = Path(sys.executable).parent / "ade-sandbox"
    proc = subprocess.run(
        [str(cli), "run", str(tmp_path / "s.py"), "--entrypoint", "main", "--timeout", "5", "--json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["status"] == "bad_output", proc.stderr[-500:]


# --- 8. accounting is the parent's; idle workers are frozen --------------------------------
LEVELS_TO_CHECK = ["process", "process+lsm", "namespaces", "strict"]


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants, read from /proc by the test itself."""
    found, index = [root], 0
    while index < len(found):
        pid, index = found[index], index + 1
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except OSError:
                pass
    return found


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


@pytest.mark.parametrize("level", LEVELS_TO_CHECK)
def test_forged_usage_report_does_not_change_the_measured_cpu_and_memory(host, level):
    require_level(level)
    source = """
    import __main__
    __main__.usage = lambda: {"cpu_s": 0.0, "peak_memory_mb": 0.0}  # the old reporting function

    def burn():
        block = bytearray(96 << 20)
        block[::4096] = b"x" * len(block[::4096])
        total = 0
        for i in range(3_000_000):
            total += i
        return total
    """
    limits = Limits(wall_s=20, cpu_s=10, memory_mb=512)
    with open_worker(textwrap.dedent(source), limits=limits, level=level) as worker:
        result = worker.call("burn")
    assert result.status == "ok", (result.error, result.stderr[-300:])
    assert result.cpu_s >= 0.05 and result.peak_memory_mb >= 90


@pytest.mark.parametrize("level", LEVELS_TO_CHECK)
def test_idle_worker_runs_nothing_between_calls(host, level):
    require_level(level)
    source = """
    import threading, time
    COUNT = [0]

    def spin():
        while True:
            COUNT[0] += 1

    def start():
        threading.Thread(target=spin, daemon=True).start()
        return threading.active_count()

    def progress():
        before = COUNT[0]
        time.sleep(0.05)
        return COUNT[0] - before
    """
    with open_worker(textwrap.dedent(source), limits=Limits(wall_s=20, cpu_s=10), level=level) as worker:
        assert worker.call("start").value == 2
        pids = _tree(worker.process.proc.pid)
        time.sleep(0.1)
        idle_before = _cpu_ticks(pids)
        time.sleep(0.5)
        idle_ticks = _cpu_ticks(pids) - idle_before
        resumed = worker.call("progress")
    assert idle_ticks <= 2, f"the idle worker used {idle_ticks} ticks of CPU"  # a spinning thread: ~50
    assert resumed.status == "ok" and resumed.value > 0  # thawed for the call


def test_a_malformed_request_is_refused_named_and_always_recorded():
    from ade_sandbox import InvalidServiceRequest
    from ade_sandbox.services import ServiceLedger

    def judge(requests):
        raise InvalidServiceRequest("requests[0].rubric", "a rubric is an object (got str)")

    ledger = ServiceLedger({"judge": Service("judge", judge, max_calls=STORED_REFUSALS + 8)})
    for _ in range(STORED_REFUSALS + 1):
        ledger.answer("nope", [])  # refusals that fill the stored ones
    ledger.answer("judge", [1])
    ledger.answer("judge", "not a list")
    *_, malformed, shape = ledger.calls
    assert (
        not malformed.ok
        and malformed.error == "invalid_service_request: requests[0].rubric: a rubric is an object (got str)"
    )
    assert not shape.ok and shape.error.startswith("invalid_service_request: requests: 'judge' expected a list")
    assert len(ledger.calls) == STORED_REFUSALS + 2


def test_a_service_with_a_signature_is_a_module_global_called_with_its_parameters():
    seen = []

    def process_judge(request):
        seen.append(request)
        return {"status": "available", "length": len(request["response_content"])}

    service = Service("llm_judge", process_judge, max_calls=16, signature=("question_prompt", "response_content"))
    source = """
    async def compute_score(question_prompt, response_content):
        positional = await llm_judge(question_prompt, response_content)
        keywords = await llm_judge(response_content=response_content, question_prompt=question_prompt)
        return [positional, keywords]

    async def misuse(kind):
        calls = {
            "one": lambda: llm_judge("q"),
            "three": lambda: llm_judge("q", "r", "x"),
            "unknown": lambda: llm_judge("q", answer="r"),
            "twice": lambda: llm_judge("q", question_prompt="r"),
        }
        try:
            await calls[kind]()
        except ServiceError as exc:
            return str(exc)
        return "answered"
    """
    with open_worker(textwrap.dedent(source), limits=FAST, services=[service]) as worker:
        scored = worker.call("compute_score", {"question_prompt": "2+2?", "response_content": "four"})
        assert scored.status == "ok", scored.error
        assert scored.value == [{"status": "available", "length": 4}] * 2
        assert seen == [{"question_prompt": "2+2?", "response_content": "four"}] * 2
        for kind in ("one", "three", "unknown", "twice"):
            refused = worker.call("misuse", {"kind": kind})
            assert refused.value.startswith("invalid_service_request: arguments: 'llm_judge' takes exactly "), refused
            assert "(question_prompt, response_content)" in refused.value
            assert refused.service_calls and not refused.service_calls[-1].ok  # the Harness sees the refusal
    assert len(seen) == 2  # a misuse never reaches the handler


def test_a_global_service_refuses_raw_frames_of_another_shape():
    from ade_sandbox.services import ServiceLedger

    service = Service("llm_judge", lambda request: request, signature=("question_prompt", "response_content"))
    ledger = ServiceLedger({"llm_judge": service})
    ledger.answer("llm_judge", [{"question_prompt": "q", "response_content": "r"}])
    ledger.answer("llm_judge", {"question_prompt": "q"})
    ledger.answer("llm_judge", {"question_prompt": "q", "response_content": "r"})
    wrong_list, missing, good = ledger.calls
    assert not wrong_list.ok and not missing.ok and good.ok
    assert missing.error.startswith("invalid_service_request: arguments: 'llm_judge' takes exactly")
    with pytest.raises(SandboxError, match="signature"):
        Service("bad", lambda r: r, signature=("not an identifier",))
