"""Training backends (TRL): SFT for data selection, GRPO for reward design and curricula."""
