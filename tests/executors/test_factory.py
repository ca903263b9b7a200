"""``[operational.executor]`` chooses and lays out the executor every Engine request of a Run goes to."""

from __future__ import annotations

import pytest

from ade_core.errors import ExecutorError
from ade_core.executors.base import Resources
from ade_core.executors.factory import Simulation, attempt_lease, make_executor
from ade_core.executors.local import LocalExecutor
from ade_core.executors.simulated import SimulatedExecutor
from ade_core.executors.slots import usable_cpus
from ade_core.harness.simulated import VirtualClock
from ade_core.plugins import load_plugins
from ade_core.schemas.config import ResourceConfig
from ade_core.schemas.operational import ExecutorSettings, OperationalSettings


def test_local_executor_takes_the_per_attempt_share_of_resources():
    cores = len(usable_cpus())
    local = make_executor(ExecutorSettings(), ResourceConfig(cpu_threads=1))
    assert isinstance(local, LocalExecutor) and local.kind == "local"
    assert local.resolve(Resources()) == Resources(cpus=1, threads=1, gpus=0)
    assert local.max_running is None  # the cores bound concurrency: one one-thread attempt per core
    every = make_executor(ExecutorSettings(), ResourceConfig())
    assert every.resolve(Resources()) == Resources(cpus=cores, threads=cores, gpus=0)
    assert every.resolve(Resources(cpus=1, threads=1)).cpus == 1  # a held-out request asks for less


def test_settings_cap_concurrency_and_offer_custom_resources():
    capped = make_executor(ExecutorSettings(slots=1, custom={"nvme": 2}), ResourceConfig(cpu_threads=1))
    assert capped.max_running == 1
    assert capped.resolve(Resources(custom={"nvme": 2})).custom == {"nvme": 2}
    with pytest.raises(ExecutorError, match="custom resource 'nvme'"):
        capped.resolve(Resources(custom={"nvme": 3}))
    assert attempt_lease(ExecutorSettings(stall_after_s=7.5)).stall_after_s == 7.5


def test_cuda_resources_need_visible_gpus():
    with pytest.raises(ExecutorError, match="GPU"):
        make_executor(ExecutorSettings(), ResourceConfig(device="cuda", train_gpus=64))


def test_dry_runs_get_the_simulated_engine_whatever_the_kind():
    task = load_plugins().task("data_selection")
    simulated = make_executor(ExecutorSettings(), ResourceConfig(), simulation=Simulation(task, VirtualClock()))
    assert isinstance(simulated, SimulatedExecutor) and simulated.kind == "simulated"


def test_the_operational_section_parses_the_executor_settings():
    settings = OperationalSettings.model_validate(
        {"executor": {"kind": "local", "slots": 2, "stall_after_s": 30, "custom": {"nvme": 1}}}
    )
    assert (settings.executor.slots, settings.executor.stall_after_s) == (2, 30.0)
    with pytest.raises(ValueError, match="kind"):
        OperationalSettings.model_validate({"executor": {"kind": "slurm"}})
    with pytest.raises(ValueError, match="slots"):
        OperationalSettings.model_validate({"executor": {"slots": 0}})


def test_a_dry_run_gives_the_same_state_digest_whatever_the_executor_kind(tmp_path):
    """Dry runs always use the simulated Engine, so naming ``ray`` changes nothing in the run's state."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
    from harness_world import config, digest_of, dry_run

    digests = []
    for kind in ("local", "ray"):
        loaded = config(extra=[f"operational.executor.kind={kind}"])
        assert loaded.operational.executor.kind == kind
        assert dry_run(tmp_path / kind, loaded) == "completed"
        digests.append(digest_of(tmp_path / kind))
    assert digests[0] == digests[1]
