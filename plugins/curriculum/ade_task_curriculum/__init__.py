"""ADE task plugin: Curriculum Learning for GRPO (paper Appendix C.4 and D.2)."""
