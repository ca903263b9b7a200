"""Child side of the sandbox: confine this process, load the strategy, serve calls.

Started as ``python -I -S start.py CONTROL_FD MESSAGE_FD`` (a stub that imports this module, so its
compiled form is used) with only the standard library.
Everything the parent needs is captured before user code is imported; user code never
sees the parent's environment, stdin, or any descriptor besides the two channels.
"""

import json
import os
import resource
import struct
import sys
import types

# asyncio, inspect and traceback are imported only when needed: start-up latency matters
# because every admission and realization spawns a fresh sandbox.

_write = os.write  # captured before user code can replace os.write
_read = os.read
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
# The C encoder/scanner are captured as functions, so patching json's classes or module
# attributes from user code cannot change how results and commands are (de)serialized.
_C_MAKE_ENCODER = json.encoder.c_make_encoder  # type: ignore[attr-defined]  # C accelerator, absent from typeshed
_C_ENCODE_STRING = json.encoder.c_encode_basestring  # type: ignore[attr-defined]  # C accelerator, absent from typeshed
_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]  # loaded by json.decoder


def _refuse(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def encode(value):
    """Strict JSON text of ``value`` (no NaN/Infinity, no non-JSON types)."""
    if _C_MAKE_ENCODER is None or _C_ENCODE_STRING is None:
        return _ENCODER.encode(value)
    if isinstance(value, str):
        return _C_ENCODE_STRING(value)
    iterencode = _C_MAKE_ENCODER({}, _refuse, _C_ENCODE_STRING, None, ":", ",", False, False, False)
    return "".join(iterencode(value, 0))


def decode(text):
    value, end = _SCAN(text, 0)
    if text[end:].strip():
        raise ValueError("extra data after the JSON value")
    return value


_pack, _unpack = struct.pack, struct.unpack
STRATEGY_NAME = "strategy.py"


class ServiceError(Exception):
    """Raised inside the strategy when the harness refuses or fails a service call."""


class Channel:
    """Length-prefixed JSON frames over two pipes (control in, messages out)."""

    def __init__(self, control_fd, message_fd):
        self.control_fd, self.message_fd = control_fd, message_fd

    def send(self, message):
        data = encode(message).encode("utf-8")
        frame = _pack(">I", len(data)) + data
        view = memoryview(frame)
        while view:
            view = view[_write(self.message_fd, view) :]

    def _exact(self, size):
        chunks, remaining = [], size
        while remaining:
            chunk = _read(self.control_fd, min(remaining, 1 << 20))
            if not chunk:
                raise EOFError("control channel closed")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def receive(self):
        (size,) = _unpack(">I", self._exact(4))
        return decode(self._exact(size).decode("utf-8"))


def apply_limits(limits):
    """rlimits, set before any user code is imported (hard == soft except CPU's grace second)."""
    cpu = int(limits["cpu_s"]) or 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    pairs = {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: limits["max_file_bytes"],
        resource.RLIMIT_NOFILE: limits["max_open_files"],
    }
    if limits.get("address_space_bytes"):
        pairs[resource.RLIMIT_AS] = limits["address_space_bytes"]
    if limits.get("max_processes"):
        pairs[resource.RLIMIT_NPROC] = limits["max_processes"]
    for which, value in pairs.items():
        resource.setrlimit(which, (value, value))


def _lsm():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out
    try:
        import lsm  # type: ignore[import-not-found]  # beside this file (on sys.path above); stdlib only
    finally:
        del sys.path[0]
    return lsm


def prepare(setup, lsm):
    """Steps that need the privileges the child starts with: the scratch mount and a fresh keyring."""
    scratch = setup.get("scratch_mount")
    if scratch:
        lsm.mount_tmpfs(scratch["path"], scratch["size_bytes"], scratch["max_inodes"])
        os.chdir(scratch["path"])  # the old cwd is the tmpfs underneath
    if setup.get("keyring"):
        lsm.join_new_session_keyring()


def drop_privileges(setup, lsm):
    """Never run user code with privileges: to the sandbox's own uid (as root), every capability
    cleared, no_new_privs set; verified from what the kernel reports."""
    uid, gid = setup.get("uid"), setup.get("gid")
    if uid is not None and os.geteuid() == 0:
        lsm.drop_bounding_set()
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0 or os.getgid() == 0:
            raise OSError("privilege drop did not take effect")
    if setup.get("clear_capabilities"):
        lsm.clear_capabilities()
        lsm.set_no_new_privs()
        left = {name: value for name, value in lsm.capability_sets().items() if name != "CapBnd" and value}
        if left:
            raise OSError(f"capabilities left after the drop: {left}")


def confine(setup, lsm):
    """Landlock and seccomp, when the parent asked for them."""
    if setup.get("landlock"):
        lsm.apply_landlock(setup["read_paths"], setup["write_paths"])
    if setup.get("seccomp"):
        lsm.apply_seccomp(unix_sockets=bool(setup.get("unix_sockets")))


def load_inputs(fds):
    """Declared inputs arrive as open descriptors, parsed before privileges are dropped."""
    values = {}
    for name, fd in fds.items():
        with os.fdopen(fd, "rb") as handle:
            values[name] = json.load(handle)
    return values


def sanitized_traceback(exc, source=None):
    """Frames of the strategy only; no paths of the host."""
    import linecache
    import traceback

    if source is not None:
        linecache.cache[STRATEGY_NAME] = (len(source), None, source.splitlines(True), STRATEGY_NAME)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == STRATEGY_NAME]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    text = "Traceback (strategy frames only):\n" + "".join(lines)
    return text[-8000:]


def _service_reply(channel, name):
    """The parent's answer to the service request just sent: its value, or ServiceError."""
    reply = channel.receive()
    if reply.get("type") != "service_result":
        raise ServiceError(f"unexpected reply to service {name!r}")
    if not reply["ok"]:
        raise ServiceError(reply["error"])
    return reply["value"]


def make_service(channel, name):
    async def service(*args, **kwargs):
        if len(args) != 1 or kwargs:
            # Still sent: the parent refuses it as a malformed request and its ledger keeps the refusal,
            # so the run fails even if the strategy catches the ServiceError.
            channel.send({"type": "service", "name": name, "args": None, "arity": len(args) + len(kwargs)})
        else:
            channel.send({"type": "service", "name": name, "args": args[0]})
        return _service_reply(channel, name)

    service.__name__ = name
    return service


def make_global_service(channel, name, signature):
    """A service set as a module global: ``await name(*signature)``, sent as one object."""
    signature = tuple(signature)

    async def service(*args, **kwargs):
        bound = dict(zip(signature, args, strict=False))
        fits = len(args) <= len(signature) and not (set(kwargs) - set(signature)) and not (set(kwargs) & set(bound))
        bound.update(kwargs)
        if fits and len(bound) == len(signature):
            channel.send({"type": "service", "name": name, "args": bound})
        else:  # refused by the parent, and recorded there (see make_service)
            channel.send({"type": "service", "name": name, "args": None, "arity": len(args) + len(kwargs)})
        return _service_reply(channel, name)

    service.__name__ = name
    return service


@types.coroutine
def _resume(coroutine, pending):
    """Hand a coroutine that suspended on a real awaitable over to an event loop."""
    while True:
        sent = yield pending
        try:
            pending = coroutine.send(sent)
        except StopIteration as stop:
            return stop.value


def run_awaitable(value):
    """Drive an awaitable; without an event loop unless it truly suspends (services do not)."""
    iterator = value.__await__()
    try:
        pending = iterator.send(None)
    except StopIteration as stop:
        return stop.value
    import asyncio

    async def finish():
        return await _resume(iterator, pending)

    return asyncio.run(finish())


def call_entry(namespace, channel, request, inputs, source):
    function = namespace.get(request["entry"])
    if not callable(function):
        return {
            "type": "result",
            "id": request["id"],
            "kind": "bad_output",
            "error": f"entry point {request['entry']!r} is not defined",
        }
    kwargs = dict(request.get("args") or {})
    kwargs.update(inputs)
    for name in request.get("services", ()):
        kwargs[name] = make_service(channel, name)
    try:
        value = function(**kwargs)
        if hasattr(value, "__await__"):
            value = run_awaitable(value)
    except MemoryError:
        return {"type": "result", "id": request["id"], "kind": "oom", "error": "MemoryError"}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are strategy failures too
        return {
            "type": "result",
            "id": request["id"],
            "kind": "exception",
            "error": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": sanitized_traceback(exc, source),
        }
    try:
        encode(value)
    except (TypeError, ValueError) as exc:
        return {
            "type": "result",
            "id": request["id"],
            "kind": "bad_output",
            "error": f"result is not strict JSON: {exc}"[:2000],
        }
    return {"type": "result", "id": request["id"], "kind": "ok", "value": value}


def run_program(setup):
    """Program mode (code graders): run the source as __main__ with the given stdin."""
    import io

    source = setup["source"]
    sys.stdin = io.TextIOWrapper(io.BytesIO(setup.get("stdin", "").encode("utf-8")), encoding="utf-8")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(source, "program.py", "exec"), namespace)
    except SystemExit as exc:
        code = exc.code
        sys.stdout.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    except BaseException:
        import traceback

        traceback.print_exc(limit=-5)
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    control_fd, message_fd = int(sys.argv[1]), int(sys.argv[2])
    channel = Channel(control_fd, message_fd)
    setup = channel.receive()
    for fd in setup.get("cgroup_fds", ()):  # join the run's cgroup before anything else runs
        _write(fd, str(os.getpid()).encode())
        os.close(fd)
    os.umask(0o077)
    lsm = _lsm() if setup.get("harden") else None
    if lsm is not None:
        prepare(setup, lsm)
    inputs = load_inputs(setup.get("input_fds", {}))
    if lsm is not None:
        drop_privileges(setup, lsm)
    apply_limits(setup["limits"])
    if lsm is not None:
        confine(setup, lsm)
    if setup["mode"] == "program":
        channel.send({"type": "ready"})
        os.close(message_fd)
        os.close(control_fd)
        run_program(setup)
    namespace = {"__name__": "strategy", "__builtins__": __builtins__, "ServiceError": ServiceError}
    for name, signature in setup.get("globals", {}).items():
        namespace[name] = make_global_service(channel, name, signature)
    try:
        exec(compile(setup["source"], STRATEGY_NAME, "exec"), namespace)
    except BaseException as exc:
        channel.send(
            {
                "type": "load_failed",
                "error": f"{type(exc).__name__}: {exc}"[:2000],
                "traceback": sanitized_traceback(exc, setup["source"]),
            }
        )
        os._exit(0)
    channel.send({"type": "ready"})
    while True:
        request = channel.receive()
        if request["type"] == "shutdown":
            break
        # CPU and memory are measured by the parent; the child reports none (it could forge them).
        channel.send(call_entry(namespace, channel, request, inputs, setup["source"]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # do not wait for threads the strategy left running


if __name__ == "__main__":
    main()
