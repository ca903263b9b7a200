"""Graders: decide whether a response answers a problem correctly."""
