"""ade-sandbox: runs untrusted strategy code outside the harness process (standard library only)."""

__version__ = "0.1.0"
