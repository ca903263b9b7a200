"""Adversarial strategies: each case asserts the typed outcome and (via ``host``) an untouched host.

Each case names the weakest isolation level that must stop it and runs at the best level
this machine reaches; below that level it skips with the probe's reason (or fails in CI).
"""

from __future__ import annotations

import os
import textwrap

import pytest

from ade_sandbox import Limits, run_strategy
from ade_sandbox.results import SandboxResult

from sandbox_host import SECRET, require_level

FAST = Limits(wall_s=5, cpu_s=2, memory_mb=256, max_output_bytes=64 << 10, max_result_bytes=1 << 20)


def run(source: str, level: str, args: dict | None = None, limits: Limits = FAST, **kw) -> SandboxResult:
    return run_strategy(textwrap.dedent(source), "main", args or {}, limits=limits, level=level, **kw)


def probe_value(result: SandboxResult) -> dict:
    assert result.status == "ok", (result.status, result.error, result.stderr[-500:])
    return result.value


# --- time and CPU -----------------------------------------------------------------------
def test_infinite_loop_is_a_cpu_timeout(host):
    result = run("def main():\n    while True:\n        pass\n", require_level("process"))
    assert result.status == "cpu_timeout"


def test_sleep_past_wall_time_is_a_timeout(host):
    result = run("import time\ndef main():\n    time.sleep(60)\n", require_level("process"), limits=Limits(wall_s=1))
    assert result.status == "timeout" and result.wall_s < 4


def test_ignoring_sigterm_and_sigxcpu_does_not_help(host):
    source = """
    import signal
    def main():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        while True:
            pass
    """
    assert run(source, require_level("process")).status == "cpu_timeout"


def test_non_daemon_thread_left_running_does_not_hold_the_run(host):
    source = """
    import threading, time
    def main():
        threading.Thread(target=lambda: time.sleep(3600)).start()
        return "done"
    """
    result = run(source, require_level("namespaces"))
    assert (result.status, result.value) == ("ok", "done") and result.wall_s < 3


# --- processes -----------------------------------------------------------------------------
def test_fork_bomb_is_capped_and_reaped(host):
    source = """
    import os, time
    def main():
        forked = 0
        while forked < 10000:
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(3600)
                os._exit(0)
            forked += 1
        return forked
    """
    result = run(source, require_level("namespaces"), limits=Limits(wall_s=10, cpu_s=5, max_processes=16))
    assert result.status == "ok" and result.value <= 24


def test_double_fork_setsid_daemon_does_not_survive(host):
    source = """
    import os, time
    def main():
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3600)
            os._exit(0)
        time.sleep(0.2)
        return "spawned"
    """
    assert run(source, require_level("namespaces")).value == "spawned"  # host fixture checks survivors


def test_killing_the_parent_fails(host):
    source = """
    import os, signal
    def main(harness_pid):
        outcome = {}
        for name, pid in (("ppid", os.getppid()), ("harness", harness_pid)):
            try:
                os.kill(pid, signal.SIGKILL)
                outcome[name] = "sent"
            except OSError as exc:
                outcome[name] = type(exc).__name__
        return outcome
    """
    result = run(source, require_level("namespaces"), {"harness_pid": os.getpid()})
    assert result.value["harness"] != "sent"  # and we are still here to assert it


def test_nested_user_namespace_is_refused(host):
    source = """
    import ctypes
    def main():
        libc = ctypes.CDLL(None, use_errno=True)
        return [libc.unshare(0x10000000), ctypes.get_errno()]
    """
    code, errno_value = probe_value(run(source, require_level("strict")))
    assert code == -1 and errno_value != 0


def test_ptrace_of_the_parent_is_refused(host):
    source = """
    import ctypes, os
    def main():
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.ptrace(16, os.getppid(), None, None)  # PTRACE_ATTACH
    """
    assert probe_value(run(source, require_level("strict"))) == -1


# --- memory and output -----------------------------------------------------------------
def test_memory_bomb_is_oom(host):
    source = "def main():\n    blocks = []\n    while True:\n        blocks.append(bytearray(16 << 20))\n"
    assert run(source, require_level("process")).status == "oom"


def test_memory_bomb_catching_memoryerror_is_oom(host):
    source = """
    def main():
        blocks = []
        while True:
            try:
                blocks.append(bytearray(8 << 20))
                blocks[-1][::4096] = b"x" * len(blocks[-1][::4096])
            except MemoryError:
                continue
    """
    result = run(source, require_level("strict"), limits=Limits(wall_s=15, cpu_s=10, memory_mb=200))
    assert result.status == "oom"


def test_huge_stdout_is_an_output_limit(host):
    source = "import sys\ndef main():\n    while True:\n        sys.stdout.write('x' * 65536)\n"
    result = run(source, require_level("process"))
    assert result.status == "output_limit" and len(result.stdout) <= FAST.max_output_bytes


def test_huge_result_is_an_output_limit(host):
    result = run("def main():\n    return 'x' * (8 << 20)\n", require_level("process"))
    assert result.status == "output_limit"


def test_result_just_over_the_cap_is_refused_and_under_is_delivered(host):
    level = require_level("process")
    limits = Limits(max_result_bytes=100_000)
    assert run("def main():\n    return 'x' * 99_000\n", level, limits=limits).status == "ok"
    assert run("def main():\n    return 'x' * 100_001\n", level, limits=limits).status == "output_limit"


def test_opening_100k_descriptors_hits_the_limit(host):
    source = """
    import os
    def main():
        fds = []
        try:
            for _ in range(100_000):
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            return [len(fds), exc.errno]
        return [len(fds), 0]
    """
    opened, errno_value = probe_value(run(source, require_level("process")))
    assert opened <= FAST.max_open_files and errno_value != 0


def test_huge_file_hits_the_file_size_limit(host):
    source = """
    def main():
        written = 0
        try:
            with open("big.bin", "wb") as handle:
                for _ in range(4096):
                    handle.write(b"x" * (1 << 20))
                    written += 1 << 20
        except OSError as exc:
            return [written, exc.errno]
        return [written, 0]
    """
    written, errno_value = probe_value(run(source, require_level("process"), limits=Limits(max_file_mb=8)))
    assert written <= 8 << 20 and errno_value != 0


def test_filling_scratch_stops_at_its_size(host):
    source = """
    def main():
        total = 0
        try:
            for index in range(1000):
                with open(f"fill{index}.bin", "wb") as handle:
                    handle.write(b"x" * (4 << 20))
                total += 4 << 20
        except OSError as exc:
            return [total, exc.errno]
        return [total, 0]
    """
    total, errno_value = probe_value(run(source, require_level("namespaces"), limits=Limits(scratch_mb=16)))
    assert total <= 16 << 20 and errno_value != 0


def test_deep_recursion_is_an_exception(host):
    result = run("def main():\n    return main()\n", require_level("process"))
    assert result.status == "exception" and "RecursionError" in result.error


def test_c_stack_overflow_is_a_crash_and_the_harness_lives(host):
    source = "import sys\ndef f(n):\n    return f(n + 1)\ndef main():\n    sys.setrecursionlimit(10**8)\n    f(0)\n"
    result = run(source, require_level("process"), limits=Limits(wall_s=20, cpu_s=15, memory_mb=1024))
    assert result.status in ("crash", "oom")


# --- filesystem ----------------------------------------------------------------------------
READ_ATTEMPT = """
import os, subprocess
def main(path):
    outcome = {}
    try:
        with open(path) as handle:
            outcome["open"] = handle.read()
    except OSError as exc:
        outcome["open"] = type(exc).__name__
    try:
        os.symlink(path, "link")
        with open("link") as handle:
            outcome["symlink"] = handle.read()
    except OSError as exc:
        outcome["symlink"] = type(exc).__name__
    try:
        outcome["subprocess"] = subprocess.run(["/bin/cat", path], capture_output=True, timeout=5).stdout.decode()
    except Exception as exc:
        outcome["subprocess"] = type(exc).__name__
    return outcome
"""


def test_held_out_canary_is_unreadable_by_path_symlink_and_subprocess(host):
    outcome = probe_value(run(READ_ATTEMPT, require_level("process+lsm"), {"path": str(host.canary)}))
    assert "canary" not in str(outcome)
    assert set(outcome) == {"open", "symlink", "subprocess"}


def test_etc_passwd_is_unreadable(host):
    outcome = probe_value(run(READ_ATTEMPT, require_level("process+lsm"), {"path": "/etc/passwd"}))
    assert "root:" not in str(outcome)


def test_writing_outside_scratch_fails(host):
    source = """
    def main(path):
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
            return "written"
        except OSError as exc:
            return type(exc).__name__
    """
    assert run(source, require_level("process+lsm"), {"path": str(host.outside)}).value != "written"


def test_declared_input_is_delivered_and_cannot_be_modified(host):
    source = """
    def main(inventory, path):
        try:
            with open(path, "w") as handle:
                handle.write("[]")
            touched = "written"
        except OSError as exc:
            touched = type(exc).__name__
        return [len(inventory), touched]
    """
    result = run(source, require_level("process+lsm"), {"path": str(host.input)}, inputs={"inventory": host.input})
    assert probe_value(result)[0] == 2 and result.value[1] != "written"


def test_parent_environ_and_memory_are_unreadable(host):
    source = """
    import os
    def main():
        outcome = {"env_secret": "ADE_TEST_SECRET" in os.environ}
        for name in ("environ", "mem"):
            try:
                with open(f"/proc/{os.getppid()}/{name}", "rb") as handle:
                    outcome[name] = "s3cr3t" in handle.read(1 << 20).decode("latin-1")
            except OSError as exc:
                outcome[name] = type(exc).__name__
        return outcome
    """
    outcome = probe_value(run(source, require_level("namespaces")))
    assert outcome["env_secret"] is False and outcome["environ"] is not True and outcome["mem"] is not True


def test_secret_env_var_is_not_visible(host):
    assert os.environ[SECRET]
    env = probe_value(run("import os\ndef main():\n    return dict(os.environ)\n", require_level("process")))
    assert SECRET not in env and set(env) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PWD"}


def test_stdin_is_closed(host):
    assert probe_value(run("import sys\ndef main():\n    return sys.stdin.read()\n", require_level("process"))) == ""


# --- network ---------------------------------------------------------------------------------
NETWORK_ATTEMPT = """
import socket
def main(kind, address):
    try:
        if kind == "tcp":
            s = socket.create_connection(tuple(address), timeout=2)
            s.sendall(b"leak")
        elif kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"leak", tuple(address))
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(address)
            s.sendall(b"leak")
        s.close()
        return "sent"
    except OSError as exc:
        return type(exc).__name__
"""


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_loopback_inet_traffic_is_blocked(host, kind):
    listener = host.tcp if kind == "tcp" else host.udp
    result = run(NETWORK_ATTEMPT, require_level("process+lsm"), {"kind": kind, "address": list(listener.address)})
    assert result.status == "ok" and result.value != "sent"


def test_pathname_unix_socket_is_out_of_view(host):
    result = run(NETWORK_ATTEMPT, require_level("namespaces"), {"kind": "unix", "address": host.unix.address})
    assert result.status == "ok" and result.value != "sent"


# --- exits and output protocol -------------------------------------------------------------
def test_os_exit_before_a_result_is_a_crash(host):
    result = run("import os\ndef main():\n    os._exit(3)\n", require_level("process"))
    assert result.status == "crash" and "code 3" in result.error


def test_sys_exit_is_an_exception(host):
    result = run("import sys\ndef main():\n    sys.exit(0)\n", require_level("process"))
    assert result.status == "exception" and result.error.startswith("SystemExit")


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "{1, 2}", "object()", "b'bytes'"])
def test_non_json_results_are_bad_output(host, value):
    result = run(f"def main():\n    return {value}\n", require_level("process"))
    assert result.status == "bad_output" and "strict JSON" in result.error


def test_monkeypatching_json_does_not_corrupt_the_result(host):
    source = """
    import json
    def main():
        json.dumps = lambda *args, **kwargs: "hacked"
        json.JSONEncoder.encode = lambda self, obj: "hacked"
        json.JSONEncoder.iterencode = lambda self, obj, _one_shot=False: iter(["hacked"])
        json.JSONDecoder.decode = lambda self, text: {"type": "shutdown"}
        return {"kept": [1, 2, 3]}
    """
    result = run(source, require_level("process"))
    assert (result.status, result.value) == ("ok", {"kept": [1, 2, 3]})


def test_malformed_forged_frame_is_bad_output(host):
    source = """
    import os, sys
    def main():
        os.write(int(sys.argv[2]), b"\\x00\\x00\\x00\\x05{bad}")
        os._exit(0)
    """
    assert run(source, require_level("process")).status == "bad_output"


def test_forged_frame_with_a_foreign_id_is_bad_output(host):
    source = """
    import json, os, struct, sys
    def main():
        body = json.dumps({"type": "result", "id": 99, "kind": "ok", "value": "forged"}).encode()
        os.write(int(sys.argv[2]), struct.pack(">I", len(body)) + body)
        os._exit(0)
    """
    assert run(source, require_level("process")).status == "bad_output"


def test_forged_accounting_does_not_lower_the_measured_cpu(host):
    source = """
    import json, os, struct, sys
    def main():
        total = 0
        for i in range(3_000_000):
            total += i
        body = json.dumps({"type": "result", "id": 1, "kind": "ok", "value": "forged", "cpu_s": 0.0}).encode()
        os.write(int(sys.argv[2]), struct.pack(">I", len(body)) + body)
        os._exit(0)
    """
    # At plain "namespaces" the parent cannot see the child's CPU; strict accounts it by cgroup.
    result = run(source, require_level("strict"))
    # The forged frame is the strategy's own output; the accounting is the parent's.
    assert result.value == "forged" and result.cpu_s > 0.05


def test_exception_traceback_shows_only_strategy_frames(host):
    result = run("def helper():\n    raise ValueError('bad')\ndef main():\n    helper()\n", require_level("process"))
    assert result.status == "exception" and "ValueError: bad" in result.error
    assert 'File "strategy.py", line 2, in helper' in result.traceback
    assert "bootstrap" not in result.traceback and "/" not in result.traceback.split("\n", 1)[1]
