"""Base model and canonical digests shared by every schema."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Digest = str
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept, NaN refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_digest(value: Any) -> Digest:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


class Model(BaseModel):
    """Strict, immutable schema model: unknown keys are errors, every field is described."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def digest(self) -> Digest:
        """Content digest over the canonical JSON form."""
        return sha256_digest(self.model_dump(mode="json"))


def DigestField(description: str) -> Any:  # noqa: N802 - reads like a type in model bodies
    """A field holding a ``sha256:<hex>`` digest."""
    return Field(pattern=DIGEST_PATTERN, description=description)
