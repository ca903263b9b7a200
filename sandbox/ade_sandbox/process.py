"""One sandboxed child process: launch at an isolation level, talk over framed pipes, supervise.

The parent owns every clock and every cap: a wall-clock deadline with SIGKILL of the whole
process group (and cgroup), capped reads of stdout/stderr/messages, and a verdict taken
from how the main process exited (wait4 status and rusage), not from pipe EOF.

Every pipe the parent writes is non-blocking: a frame is written through the same selector
loop that reads the child's output, under the caller's deadline and the wall clock, so a child
that stops reading its control pipe cannot hang the harness (it is killed with reason "wall").
Between calls a worker's processes are frozen (a v2 cgroup's freezer, else SIGSTOP of each of
its processes) and thawed when the next frame is due. CPU and peak memory are the
parent's measurements (cgroup counters, else ``accounting``), never the child's report.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ade_sandbox import accounting, channel, layers
from ade_sandbox.limits import IsolationUnavailable, Limits


class ChannelError(Exception):
    """The child broke the frame protocol or exceeded the result cap."""


class ResultTooLarge(ChannelError):
    """A message from the child is larger than ``Limits.max_result_bytes``."""


@dataclass
class Exit:
    """How the child ended, as observed by the parent."""

    returncode: int | None = None
    signal: int | None = None
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    reason: str | None = None  # "wall" | "output_limit" | "result_limit" | "protocol" | "refusals" | "closed"
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
    cpu_seen: float | None = None  # the parent's latest measurements while the child lived
    peak_seen_mb: float | None = None
    _error: ChannelError | None = None
    _frozen: str | None = None  # "cgroup" | "signals" while frozen
    _stopped: list[int] = field(default_factory=list)
    _startup_peak_mb: float | None = None

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
        # A cgroup at the confined levels: per-sandbox memory (kernel memory included) and process caps.
        # `namespaces` goes without (attaching a process to a v1 cgroup waits for an RCU grace period,
        # ~10 ms a spawn); there the sandbox's own uid bounds its processes and the docs say what is left.
        cgroup = layers.Cgroup.create(limits.memory_mb << 20, limits.max_processes + 8) if confined else None
        scratch = None
        if namespaced:
            command = layers.bwrap_command(limits.scratch_mb, as_root=as_root)
            python, bootstrap = layers.inner_interpreter(), f"{layers.INNER_SANDBOX_DIR}/{layers.START}"
            home, cwd = layers.INNER_SCRATCH, "/"
        else:
            scratch = tempfile.mkdtemp(prefix="ade-sandbox-")
            command, python, bootstrap = [], layers.interpreter(), layers.runtime().start
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
        if not child.send(setup, child.started + limits.wall_s) and child.exit is None:
            child.kill("wall")
        return child

    def _watch(self) -> None:
        assert self.proc.stdout and self.proc.stderr
        os.set_blocking(self.control_fd, False)  # written through the selector loop, never blocking
        for fd in (self.message_fd, self.proc.stdout.fileno(), self.proc.stderr.fileno()):
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
            self._selector.register(self._pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            self._pidfd = None  # fall back to polling the exit status

    # --- protocol ---------------------------------------------------------------------
    def send(self, message: dict[str, Any] | bytes, deadline: float) -> bool:
        """Write one frame (a message, or its encoded body) by ``deadline``, reading the child's
        output meanwhile so that neither side waits on the other.

        False when the frame was not delivered: the child is gone, ``deadline`` passed (the
        caller decides), or the wall clock ran out (the child is then killed with reason "wall").
        """
        self.thaw()
        body = message if isinstance(message, bytes) else channel.encode(message)
        header = channel.HEADER.pack(len(body))
        # One write for the common small frame; a large body is not copied to prefix it.
        pending = [memoryview(header + body)] if len(body) < 1 << 16 else [memoryview(header), memoryview(body)]
        waiting = False
        try:
            while pending:
                if self.exit is not None:
                    return False
                try:
                    pending[0] = pending[0][os.write(self.control_fd, pending[0]) :]
                except BlockingIOError:
                    pass
                except OSError:  # the child closed its end
                    return False
                if not pending[0]:
                    pending.pop(0)
                    continue
                if not waiting:
                    self._selector.register(self.control_fd, selectors.EVENT_WRITE)
                    waiting = True
                if not self._wait(deadline):
                    return False
        finally:
            if waiting and self.control_fd in self._selector.get_map():
                self._selector.unregister(self.control_fd)
        return True

    def _take_frame(self) -> dict[str, Any] | None:
        if len(self._buffer) < 4:
            return None
        (size,) = channel.HEADER.unpack_from(self._buffer)
        if size > self.limits.max_result_bytes:
            raise ResultTooLarge(f"result of {size} bytes exceeds the {self.limits.max_result_bytes}-byte cap")
        if len(self._buffer) < 4 + size:
            return None
        with memoryview(self._buffer) as view:
            raw = bytes(view[4 : 4 + size])
        del self._buffer[: 4 + size]
        try:
            message = channel.decode(
                raw, max_depth=self.limits.max_result_depth, max_items=self.limits.max_result_items
            )
        except channel.FrameRefused as exc:
            raise ChannelError(str(exc)) from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ChannelError("malformed message: not a typed object")
        return message

    def _drain(self, fd: int) -> bool:
        """Read what is available; False at EOF (or once the message cap is exceeded)."""
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            self._selector.unregister(fd)
            return False
        if fd == self.message_fd:
            self._buffer += chunk
            if len(self._buffer) > self.limits.max_result_bytes + 4 and self._error is None:
                self._error = ResultTooLarge(f"result exceeds the {self.limits.max_result_bytes}-byte cap")
                self._selector.unregister(fd)
                self.kill("result_limit")
                return False
        else:
            target = self.stdout if fd == self.proc.stdout.fileno() else self.stderr  # type: ignore[union-attr]  # the child is started with piped stdout
            room = self.limits.max_output_bytes - len(target)
            target += chunk[: max(room, 0)]
            if len(chunk) > room:
                self.kill("output_limit")
        return True

    def _wait(self, deadline: float) -> bool:
        """Wait once for the child (output, its exit, room in the control pipe) and handle it.

        False when ``deadline`` passed or the wall clock ran out (then the child is killed).
        """
        now = time.monotonic()
        wall_left = self.started + self.limits.wall_s - now
        if wall_left <= 0:
            self.kill("wall")
            return False
        remaining = deadline - now
        if remaining <= 0:
            return False
        timeout = min(remaining, wall_left, 0.05 if self._pidfd is None else 3600)
        for key, _ in self._selector.select(timeout):
            if key.fd == self._pidfd:
                self._reap()
            elif key.fd != self.control_fd and key.fd in self._selector.get_map():
                self._drain(key.fd)
        if self._pidfd is None and self.exit is None and self.proc.poll() is not None:
            self._reap()
        return True

    def next_message(self, deadline: float) -> dict[str, Any] | None:
        """The next frame, or None when the child exited, was killed, or the deadline passed.

        Once the parent has killed the child no further frame is delivered: a kill is a verdict.
        """
        while True:
            if self._error is not None:
                raise self._error
            if self.kill_reason is not None:
                return None
            message = self._take_frame_safe()
            if message is not None or self.exit is not None:
                return message
            if not self._wait(deadline):
                return None

    def _take_frame_safe(self) -> dict[str, Any] | None:
        try:
            return self._take_frame()
        except ResultTooLarge:
            self.kill("result_limit")
            raise
        except ChannelError:
            self.kill("protocol")
            raise

    # --- between calls --------------------------------------------------------------------
    def freeze(self) -> None:
        """Stop every process of the child until ``thaw``: an idle worker runs nothing.

        A v2 cgroup is frozen whole. Otherwise each process is sent SIGSTOP: the cgroup's
        members where there is a cgroup, else every process under the launched one, parents
        first, until a pass finds none new (a fork that raced its parent's stop).
        """
        if self.exit is not None or self._frozen is not None:
            return
        if self.cgroup is not None and self.cgroup.freeze():
            self._frozen = "cgroup"
            return
        self._frozen, self._stopped = "signals", []
        seen: set[int] = set()
        while True:
            fresh = [pid for pid in self._members() if pid not in seen]
            if not fresh:
                break
            for pid in fresh:
                _signal(pid, signal.SIGSTOP)
            seen.update(fresh)
            self._stopped += fresh
        _signal(-self.proc.pid, signal.SIGSTOP)  # the group: an orphan that kept it (process level)

    def thaw(self) -> None:
        """Resume what ``freeze`` stopped; called before any frame is sent to the child."""
        frozen, self._frozen = self._frozen, None
        if frozen == "cgroup" and self.cgroup is not None:
            self.cgroup.freeze(False)
        elif frozen == "signals":
            _signal(-self.proc.pid, signal.SIGCONT)
            for pid in reversed(self._stopped):
                _signal(pid, signal.SIGCONT)
            self._stopped = []

    def _members(self) -> list[int]:
        """The child's processes: its cgroup's (every member joins every controller), else its tree."""
        if self.cgroup is None:
            return accounting.descendants(self.proc.pid)
        try:
            return [int(pid) for pid in (self.cgroup.paths["pids"] / "cgroup.procs").read_text().split()]
        except OSError:
            return accounting.descendants(self.proc.pid)

    def usage(self) -> tuple[float | None, float | None]:
        """CPU seconds and peak memory (MB) of the child's processes so far, as the parent measures
        them: the cgroup's counters where there is a cgroup, else ``/proc`` of the process tree."""
        if self.exit is None:
            group = self.cgroup
            cpu = group.cpu_seconds() if group else None
            if group is None or cpu is None:
                pids = self._stopped or accounting.descendants(self.proc.pid)
                cpu, peak = accounting.cpu_seconds(pids), accounting.peak_mb(pids)
            else:
                # The interpreter started before it joined the group, so the group's peak misses
                # its start-up; read once, that is a floor (all later memory is the group's).
                if self._startup_peak_mb is None:
                    self._startup_peak_mb = accounting.peak_mb(accounting.descendants(self.proc.pid))
                peak = max(self._startup_peak_mb, (group.peak_bytes() or 0) / (1 << 20))
            self.cpu_seen = max(cpu, self.cpu_seen or 0.0)
            self.peak_seen_mb = max(peak, self.peak_seen_mb or 0.0)
        return self.cpu_seen, self.peak_seen_mb

    # --- ending -------------------------------------------------------------------------
    def kill(self, reason: str) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
        if self.exit is None:
            self.usage()  # the last look while the processes still exist
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup:
            self.cgroup.kill_all()  # thaws a frozen group, so that SIGKILL takes effect
        self._reap()

    def _reap(self) -> None:
        if self.exit is not None:
            return
        _, status, rusage = os.wait4(self.proc.pid, 0)
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
        peak = max(rusage.ru_maxrss / 1024, self.peak_seen_mb or 0.0)
        cpu = max(rusage.ru_utime + rusage.ru_stime, self.cpu_seen or 0.0)
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
        self._frozen, self._stopped = None, []
        for fd in [key.fd for key in self._selector.get_map().values()]:
            if fd not in (self._pidfd, self.control_fd):
                while self._drain(fd) and fd in self._selector.get_map() and self._has_data(fd):
                    pass

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
            deadline = time.monotonic() + grace_s
            if self.send({"type": "shutdown"}, deadline):
                while self.exit is None and self.kill_reason is None and time.monotonic() < deadline:
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


def _signal(pid: int, signum: int) -> None:
    """Signal a process (a group when ``pid`` is negative) that may already be gone."""
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
