"""The embedded tiny math world: problems, splits, an SFT candidate pool with known defects,
a character-level tokenizer and a small base model, all built locally and deterministically."""
