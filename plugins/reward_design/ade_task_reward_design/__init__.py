"""ADE task plugin: Reward Design for GRPO (paper Appendix C.4 and D.2)."""
