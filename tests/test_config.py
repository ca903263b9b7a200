"""Config loading: layering, overrides, the frozen digest, and every bad-input case."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from ade_core.config import check_against_plugins, load_config, operational_changes
from ade_core.errors import ConfigError, UnknownTaskError
from ade_core.plugins import load_plugins

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

TINY = EXAMPLES / "tiny-data-selection.toml"
PAPER = sorted(EXAMPLES.glob("paper-*.toml"))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def child_of_tiny(tmp_path, body: str, name: str = "child.toml"):
    return write(tmp_path, name, f'extends = "{TINY}"\n{body}')


def test_tiny_example_loads_with_a_stable_digest():
    first, second = load_config(TINY), load_config(TINY)
    assert first.digest == second.digest and first.digest.startswith("sha256:")
    assert first.experiment.task == "data_selection"
    assert first.experiment.training.recipe.effective_batch_size == 16


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.name)
def test_paper_presets_load(path):
    loaded = load_config(path)
    assert loaded.experiment.budget.plans_per_coordinator == 5
    assert loaded.experiment.budget.builder_reflections == 2


def test_paper_values():
    ds = load_config(EXAMPLES / "paper-data-selection-math.toml").experiment
    assert (ds.data.pool.size, ds.data.select_size, ds.data.max_tokens_per_example) == (3840, 384, 16384)
    assert ds.training.sft.effective_batch_size == 32 and ds.training.sft.deepspeed.zero_stage == 3
    assert ds.training.sft.bf16 and ds.model.special_tokens == ("<think>", "</think>")
    assert (ds.evaluation.in_loop.k_online, ds.evaluation.in_loop.k_offline) == (8, 32)
    d = ds.evaluation.decoding
    assert (d.temperature, d.top_p, d.max_context_tokens, d.max_new_tokens, d.reasoning_reserve_tokens) == (
        0.6,
        0.95,
        32768,
        16384,
        8192,
    )
    assert len(ds.evaluation.held_out) == 4
    code = load_config(EXAMPLES / "paper-data-selection-code.toml").experiment
    assert (code.evaluation.in_loop.k_online, code.evaluation.in_loop.k_offline) == (3, 3)
    rd = load_config(EXAMPLES / "paper-reward-design-math.toml").experiment
    g = rd.training.grpo
    assert (g.total_steps, g.prompts_per_step, g.rollouts_per_prompt, g.learning_rate) == (100, 256, 8, 5e-7)
    assert (g.clip_ratio, g.entropy_coef, g.kl_coef, g.kl_estimator) == (0.2, 0.001, 1e-4, "low_var_kl")
    assert (g.max_grad_norm, g.weight_decay, g.max_prompt_tokens, g.max_response_tokens) == (1.0, 0.01, 1024, 8192)
    assert g.lr_scheduler == "constant" and g.rollout_temperature == 1.0 and g.shuffle_data
    assert rd.checkpoint.every_steps == 4 and rd.data.pool.size == 3072
    assert (rd.evaluation.in_loop.k_online, rd.evaluation.in_loop.k_offline) == (1, 3)
    cl = load_config(EXAMPLES / "paper-curriculum-math.toml").experiment
    assert not cl.training.grpo.shuffle_data and not cl.training.grpo.shuffle_actor
    assert cl.training.grpo.total_steps == 100 and cl.training.grpo.prompts_per_step == 256


def test_paper_presets_pass_plugin_checks():
    registry = load_plugins()
    for name in ("data-selection-math", "data-selection-code", "reward-design-math", "curriculum-math"):
        check_against_plugins(load_config(EXAMPLES / f"paper-{name}.toml"), registry)


def test_extends_merges_tables_and_child_wins(tmp_path):
    child = child_of_tiny(tmp_path, "[training.sft]\nepochs = 2\n")
    loaded = load_config(child)
    assert loaded.experiment.training.sft.epochs == 2
    assert loaded.experiment.training.sft.learning_rate == 5e-4  # inherited
    assert loaded.sources == (TINY.resolve(), child.resolve())
    assert loaded.digest != load_config(TINY).digest


def test_operational_settings_are_not_digested(tmp_path):
    child = child_of_tiny(tmp_path, '[operational]\nrun_dir = "elsewhere"\n[operational.executor]\nslots = 2\n')
    base, changed = load_config(TINY), load_config(child)
    assert base.digest == changed.digest
    assert operational_changes(base.operational, changed.operational) == [
        ("executor.slots", None, 2),
        ("run_dir", "runs", "elsewhere"),
    ]


def test_set_overrides_are_typed_and_change_the_digest():
    loaded = load_config(TINY, ["budget.coordinators=3", "training.sft.learning_rate=1e-3", "name=renamed"])
    assert loaded.experiment.budget.coordinators == 3
    assert loaded.experiment.training.sft.learning_rate == 1e-3
    assert loaded.experiment.name == "renamed"  # bare words are kept as strings
    assert loaded.digest != load_config(TINY).digest


def test_experiment_config_is_frozen():
    experiment = load_config(TINY).experiment
    with pytest.raises(pydantic.ValidationError):
        experiment.name = "changed"
    with pytest.raises(pydantic.ValidationError):
        experiment.training.sft.epochs = 1


# --- bad input ---------------------------------------------------------------------
def test_unknown_key_suggests_the_closest(tmp_path):
    path = child_of_tiny(tmp_path, "[data.pool]\nsise = 10\n")
    with pytest.raises(ConfigError, match=r"\[data\.pool\]\.sise: unknown key \(did you mean 'size'\?\)"):
        load_config(path)


def test_unknown_top_level_table(tmp_path):
    with pytest.raises(ConfigError, match=r"budgett: unknown key \(did you mean 'budget'\?\)"):
        load_config(child_of_tiny(tmp_path, "[budgett]\ncoordinators = 2\n"))


def test_wrong_type_names_path_and_value(tmp_path):
    path = child_of_tiny(tmp_path, '[training.sft]\nlearning_rate = "fast"\n')
    with pytest.raises(ConfigError, match=r"\[training\.sft\]\.learning_rate: .*number.*\(got 'fast'\)"):
        load_config(path)


def test_cross_field_rule_names_both_values(tmp_path):
    path = child_of_tiny(tmp_path, "[evaluation.in_loop]\nk_online = 8\nk_offline = 4\n")
    with pytest.raises(ConfigError, match=r"k_offline must be >= k_online \(got k_online=8, k_offline=4\)"):
        load_config(path)


def test_missing_required_key(tmp_path):
    path = write(tmp_path, "bare.toml", 'task = "data_selection"\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"model: required key is missing"):
        load_config(path)


def test_missing_file_and_missing_parent(tmp_path):
    with pytest.raises(ConfigError, match="config file not found: .*nowhere.toml"):
        load_config(tmp_path / "nowhere.toml")
    child = write(tmp_path, "child.toml", 'extends = "gone.toml"\n')
    with pytest.raises(ConfigError, match=r"gone\.toml \(extended from .*child\.toml\)"):
        load_config(child)


def test_circular_extends(tmp_path):
    write(tmp_path, "a.toml", 'extends = "b.toml"\n')
    write(tmp_path, "b.toml", 'extends = "a.toml"\n')
    with pytest.raises(ConfigError, match=r"circular extends: .*a\.toml -> .*b\.toml -> .*a\.toml"):
        load_config(tmp_path / "a.toml")


def test_invalid_toml_syntax(tmp_path):
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(write(tmp_path, "bad.toml", "task = \n"))


def test_malformed_override():
    with pytest.raises(ConfigError, match="expected section.key=value"):
        load_config(TINY, ["budget.coordinators"])


def test_override_of_unknown_key_is_an_error():
    with pytest.raises(
        ConfigError, match=r"--set 'budget.coordinatorz=3': .* \(did you mean 'budget.coordinators'\?\)"
    ):
        load_config(TINY, ["budget.coordinatorz=3"])


def test_unknown_task_suggests_a_name(tmp_path):
    loaded = load_config(child_of_tiny(tmp_path, 'task = "data_selektion"\n'))
    with pytest.raises(UnknownTaskError, match="did you mean 'data_selection'"):
        check_against_plugins(loaded, load_plugins())


def test_paradigm_must_match_the_task(tmp_path):
    loaded = load_config(child_of_tiny(tmp_path, 'task = "curriculum"\n'))
    with pytest.raises(ConfigError, match="task 'curriculum' trains with 'grpo'"):
        check_against_plugins(loaded, load_plugins())


def test_recipe_table_must_match_paradigm(tmp_path):
    path = child_of_tiny(tmp_path, '[training]\nparadigm = "grpo"\n')
    with pytest.raises(ConfigError, match=r"paradigm = 'grpo' needs exactly a \[training.grpo\] table"):
        load_config(path)
