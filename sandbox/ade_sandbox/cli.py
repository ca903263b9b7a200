"""``ade-sandbox run|doctor`` (also reachable as ``ade sandbox run|doctor``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from ade_sandbox.limits import LEVELS, IsolationUnavailable, Limits, SandboxError
from ade_sandbox.probe import probe
from ade_sandbox.runner import run_strategy
from ade_sandbox.static_check import check_source


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ade-sandbox", description="Run untrusted strategy code in isolation.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one entry point of a strategy file")
    run.add_argument("file", type=Path, help="strategy source file")
    run.add_argument("--entrypoint", required=True, help="function to call")
    run.add_argument("--args-json", type=Path, help="JSON object file of keyword arguments")
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a JSON file passed as argument NAME (read-only; repeatable)",
    )
    run.add_argument(
        "--allow-import",
        action="append",
        metavar="MODULE",
        help="restrict imports to these modules (repeatable); default: no restriction",
    )
    run.add_argument("--timeout", type=float, default=60.0, help="wall-clock seconds")
    run.add_argument("--cpu", type=float, default=60.0, help="CPU seconds")
    run.add_argument("--memory", type=int, default=2048, help="memory limit in MB")
    run.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"override one limit (repeatable); names: {', '.join(f.name for f in fields(Limits))}",
    )
    run.add_argument("--min-isolation", choices=LEVELS, default="process", help="refuse to run below this level")
    run.add_argument("--json", action="store_true", help="print the SandboxResult as JSON")
    doctor = commands.add_parser("doctor", help="show which isolation layers work on this machine")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def read_source(path: Path) -> str:
    """A strategy file's text; one that is not UTF-8 is an error naming the byte offset."""
    if not path.is_file():
        raise SandboxError(f"strategy file not found: {path}")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SandboxError(
            f"{path} is not UTF-8 text: byte {exc.start} (line {line}) is {data[exc.start : exc.start + 1]!r}; "
            "save the strategy as UTF-8"
        ) from None


def limits_from(args: argparse.Namespace) -> Limits:
    """--timeout/--cpu/--memory, then each --limit NAME=VALUE on top."""
    values: dict[str, float | int] = {"wall_s": args.timeout, "cpu_s": args.cpu, "memory_mb": args.memory}
    known = {f.name: f for f in fields(Limits)}
    for item in args.limit:
        name, sep, raw = item.partition("=")
        if not sep or name not in known:
            raise SandboxError(f"--limit {item!r}: expected NAME=VALUE with NAME one of {', '.join(known)}")
        try:
            values[name] = float(raw) if name in ("wall_s", "cpu_s") else int(raw)
        except ValueError:
            raise SandboxError(f"--limit {item!r}: {raw!r} is not a number") from None
    return Limits(**values)  # type: ignore[arg-type]  # each value matches its field: parsed by name above


@contextlib.contextmanager
def _progress(limit_s: float, every_s: float = 5.0):
    """A line on stderr every few seconds while a silent strategy runs: elapsed / limit."""
    done, started = threading.Event(), time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            print(f"running: {time.monotonic() - started:.0f} s elapsed (limit {limit_s:g} s)", file=sys.stderr)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _run(args: argparse.Namespace) -> int:
    source = read_source(args.file)
    call_args = {}
    if args.args_json:
        call_args = json.loads(args.args_json.read_text(encoding="utf-8"))
        if not isinstance(call_args, dict):
            raise SandboxError(f"--args-json {args.args_json} must hold a JSON object, got {type(call_args).__name__}")
    inputs = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name.isidentifier():
            raise SandboxError(f"--input {item!r}: expected NAME=PATH with NAME a parameter name")
        if not Path(path).is_file():
            raise SandboxError(f"--input {name}: file not found: {path}")
        inputs[name] = path
    violations = check_source(source, [], args.allow_import)
    limits = limits_from(args)
    if violations:
        result_json = {"status": "policy_violation", "error": "; ".join(map(str, violations))}
        status = "policy_violation"
    else:
        with _progress(limits.wall_s):
            result = run_strategy(
                source, args.entrypoint, call_args, inputs=inputs, limits=limits, min_isolation=args.min_isolation
            )
        result_json, status = result.to_json(), result.status
    if args.json:
        print(json.dumps(result_json, indent=2))
    else:
        print(f"status: {status}")
        for key in ("value", "error", "traceback", "isolation", "wall_s", "cpu_s", "peak_memory_mb"):
            if result_json.get(key) is not None:
                print(f"{key}: {result_json[key]}")
    return 0 if status == "ok" else 1


def _doctor(args: argparse.Namespace) -> int:
    report = probe()
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    for layer in report.layers:
        print(f"{'yes' if layer.available else 'no ':3}  {layer.name:11} {layer.detail}")
    for level in report.levels:
        state = "usable" if level.usable else "not usable"
        print(f"\nlevel {level.level} ({state})" + (f": WARNING {level.warning}" if level.warning else ""))
        for text in level.enforced:
            print(f"  enforced      {text}")
        for text in level.not_enforced:
            print(f"  not enforced  {text}")
    print(f"\nbest isolation level: {report.best_level} (levels: {' < '.join(LEVELS)})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args) if args.command == "run" else _doctor(args)
    except IsolationUnavailable as exc:  # the machine lacks a layer: exit 3, as ade_core.exit_codes.ENVIRONMENT
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    except (SandboxError, json.JSONDecodeError, OSError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
