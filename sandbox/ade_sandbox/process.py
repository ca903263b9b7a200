"""One sandboxed child process: launch at an isolation level, talk over framed pipes, supervise.

The parent owns every clock and every cap: a wall-clock deadline with SIGKILL of the whole
process group (and cgroup), capped reads of stdout/stderr/messages, and a verdict taken
from how the main process exited (wait4 status and rusage), not from pipe EOF.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ade_sandbox import layers
from ade_sandbox.limits import IsolationUnavailable, Limits


class ChannelError(Exception):
    """The child broke the frame protocol or exceeded the result cap."""


class ResultTooLarge(ChannelError):
    """A message from the child is larger than ``Limits.max_result_bytes``."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


@dataclass
class Exit:
    """How the child ended, as observed by the parent."""

    returncode: int | None = None
    signal: int | None = None
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    reason: str | None = None  # "wall" | "output_limit" | "result_limit" | "protocol" | "closed"
    oom: bool = False


@dataclass
class SandboxProcess:
    """A launched child and the parent's view of it."""

    level: str
    limits: Limits
    proc: subprocess.Popen[bytes]
    control_fd: int
    message_fd: int
    cgroup: layers.Cgroup | None
    scratch: str | None
    started: float
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    _buffer: bytearray = field(default_factory=bytearray)
    _selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    _pidfd: int | None = None
    exit: Exit | None = None
    kill_reason: str | None = None

    # --- launch ---------------------------------------------------------------------
    @classmethod
    def launch(cls, level: str, limits: Limits, setup: dict[str, Any], input_paths: dict[str, str]) -> SandboxProcess:
        namespaced = level in ("namespaces", "strict")
        confined = level in ("process+lsm", "strict")
        as_root = os.geteuid() == 0
        # Namespaced levels bind the runtime into the view, so it is always reachable there.
        drop = as_root and (namespaced or layers.can_drop_uid())
        if as_root and not drop and level != "process":
            raise IsolationUnavailable(
                f"isolation {level!r} never runs strategy code as root, and no unprivileged uid can reach "
                f"the sandbox runtime under {layers.runtime_root()}; make it reachable (or set "
                f"{layers.RUNTIME_ENV} to a directory every user can traverse) or run as a non-root user"
            )
        # A cgroup wherever one can be made: per-sandbox memory and process caps and kernel-memory accounting.
        cgroup = layers.Cgroup.create(limits.memory_mb << 20, limits.max_processes + 8)
        scratch = None
        if namespaced:
            command = layers.bwrap_command(limits.scratch_mb, as_root=as_root)
            python, bootstrap = layers.inner_interpreter(), f"{layers.INNER_SANDBOX_DIR}/bootstrap.py"
            home, cwd = layers.INNER_SCRATCH, "/"
        else:
            scratch = tempfile.mkdtemp(prefix="ade-sandbox-")
            command, python, bootstrap = [], layers.interpreter(), layers.runtime().bootstrap
            home, cwd = scratch, scratch
        control_r, control_w = os.pipe()
        message_r, message_w = os.pipe()
        input_fds = {name: os.open(path, os.O_RDONLY | os.O_CLOEXEC) for name, path in input_paths.items()}
        cgroup_fds = cgroup.open_procs() if cgroup else []
        command += [python, "-I", "-S", bootstrap, str(control_r), str(message_w)]
        read, write = layers.landlock_paths(namespaced=namespaced, scratch=home)
        seccomp = confined or (namespaced and layers.seccomp_usable())
        setup = {
            **setup,
            "limits": limits.for_child(cgroup_memory=cgroup is not None, drop_uid=drop),
            "harden": True,
            "clear_capabilities": True,
            "keyring": True,
            "scratch_mount": (
                {
                    "path": layers.INNER_SCRATCH,
                    "size_bytes": limits.scratch_mb << 20,
                    "max_inodes": limits.scratch_files,
                }
                if namespaced
                else None
            ),
            "landlock": confined,
            "seccomp": seccomp,
            "unix_sockets": namespaced,  # own mount and network namespaces: no host socket is reachable
            "read_paths": read,
            "write_paths": write,
            "input_fds": input_fds,
            "cgroup_fds": cgroup_fds,
        }
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(control_r, message_w, *input_fds.values(), *cgroup_fds),
                env=layers.minimal_env(home),
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            if cgroup:
                cgroup.remove()
            if scratch:
                _remove_tree(scratch)
            raise
        finally:
            for fd in (control_r, message_w, *input_fds.values(), *cgroup_fds):
                os.close(fd)
        # The child waits for its setup, so the uid can be the one its pid reserves.
        uid = layers.sandbox_uid(proc.pid) if drop else None
        if scratch and uid is not None:
            os.chown(scratch, uid, uid)
        setup["uid"] = setup["gid"] = uid
        child = cls(level, limits, proc, control_w, message_r, cgroup, scratch, time.monotonic())
        child._watch()
        child.send(setup)
        return child

    def _watch(self) -> None:
        assert self.proc.stdout and self.proc.stderr
        for fd in (self.message_fd, self.proc.stdout.fileno(), self.proc.stderr.fileno()):
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
            self._selector.register(self._pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            self._pidfd = None  # fall back to polling the exit status

    # --- protocol ---------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> bool:
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
        try:
            os.write(self.control_fd, struct.pack(">I", len(data)))
            view = memoryview(data)
            while view:
                view = view[os.write(self.control_fd, view) :]
        except (BrokenPipeError, OSError):
            return False
        return True

    def _take_frame(self) -> dict[str, Any] | None:
        if len(self._buffer) < 4:
            return None
        (size,) = struct.unpack(">I", self._buffer[:4])
        if size > self.limits.max_result_bytes:
            raise ResultTooLarge(f"result of {size} bytes exceeds the {self.limits.max_result_bytes}-byte cap")
        if len(self._buffer) < 4 + size:
            return None
        raw = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        try:
            message = _STRICT.decode(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ChannelError(f"malformed message: {exc}") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ChannelError("malformed message: not a typed object")
        return message

    def _drain(self, fd: int) -> bool:
        """Read what is available; False at EOF."""
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            self._selector.unregister(fd)
            return False
        if fd == self.message_fd:
            self._buffer += chunk
            if len(self._buffer) > self.limits.max_result_bytes + 4:
                raise ResultTooLarge(f"result exceeds the {self.limits.max_result_bytes}-byte cap")
        else:
            target = self.stdout if fd == self.proc.stdout.fileno() else self.stderr  # type: ignore[union-attr]
            room = self.limits.max_output_bytes - len(target)
            target += chunk[: max(room, 0)]
            if len(chunk) > room:
                self.kill("output_limit")
        return True

    def next_message(self, deadline: float) -> dict[str, Any] | None:
        """The next frame, or None when the child exited, was killed, or the deadline passed."""
        while True:
            if self.exit is not None:
                return self._take_frame_safe()
            message = self._take_frame_safe()
            if message is not None or self.exit is not None:
                return message
            remaining = deadline - time.monotonic()
            wall_left = self.started + self.limits.wall_s - time.monotonic()
            if wall_left <= 0:
                self.kill("wall")
                continue
            if remaining <= 0:
                return None
            timeout = min(remaining, wall_left, 0.05 if self._pidfd is None else 3600)
            for key, _ in self._selector.select(timeout):
                if key.fd == self._pidfd:
                    self._reap()
                elif key.fd in self._selector.get_map():
                    self._drain(key.fd)
            if self._pidfd is None and self.proc.poll() is not None:
                self._reap()

    def _take_frame_safe(self) -> dict[str, Any] | None:
        try:
            return self._take_frame()
        except ResultTooLarge:
            self.kill("result_limit")
            raise
        except ChannelError:
            self.kill("protocol")
            raise

    # --- ending -------------------------------------------------------------------------
    def kill(self, reason: str) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup:
            self.cgroup.kill_all()
        self._reap()

    def _reap(self) -> None:
        if self.exit is not None:
            return
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        # The group may hold orphans (daemons, threads' children): nothing outlives the run.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        sig = -self.proc.returncode if self.proc.returncode < 0 else None
        code = self.proc.returncode if self.proc.returncode >= 0 else None
        if sig is None and self.level in ("namespaces", "strict") and code is not None and 128 < code < 160:
            sig, code = code - 128, None  # bubblewrap reports a signalled child as 128 + signal
        peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        if self.cgroup:
            self.cgroup.kill_all()  # before reading: nothing may still be running in the group
            cgroup_peak, cgroup_cpu = self.cgroup.peak_bytes(), self.cgroup.cpu_seconds()
            peak = max(peak, (cgroup_peak or 0) / (1 << 20))
            cpu = max(cpu, cgroup_cpu or 0.0)
        self.exit = Exit(
            returncode=code,
            signal=sig,
            cpu_s=cpu,
            peak_memory_mb=peak,
            reason=self.kill_reason,
            oom=bool(self.cgroup and self.cgroup.oom_killed()),
        )
        for fd in list(self._selector.get_map()):
            if fd != self._pidfd:
                while self._drain_quiet(fd):
                    pass

    def _drain_quiet(self, fd: int) -> bool:
        try:
            return self._drain(fd) and fd in self._selector.get_map() and self._has_data(fd)
        except ChannelError:
            return False

    def _has_data(self, fd: int) -> bool:
        ready = selectors.DefaultSelector()
        ready.register(fd, selectors.EVENT_READ)
        try:
            return bool(ready.select(0))
        finally:
            ready.close()

    def close(self, grace_s: float = 2.0) -> Exit:
        """Ask the child to stop, wait briefly, then kill; release every resource."""
        if self.exit is None:
            self.send({"type": "shutdown"})
            deadline = time.monotonic() + grace_s
            while self.exit is None and time.monotonic() < deadline:
                try:
                    self.next_message(deadline)
                except ChannelError:
                    break
            if self.exit is None:
                self.kill("closed")
        for fd in (self.control_fd, self.message_fd, self._pidfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._selector.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        if self.cgroup:
            self.cgroup.remove()
        if self.scratch:
            _remove_tree(self.scratch)
        assert self.exit is not None
        return self.exit

    def output(self) -> tuple[str, str]:
        return self.stdout.decode("utf-8", "replace"), self.stderr.decode("utf-8", "replace")


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
