"""ADE task plugin: Data Selection (paper Sec 4, Appendix C.4 and D.1)."""
