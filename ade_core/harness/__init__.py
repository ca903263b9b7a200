"""The Harness: admission, binding, views, memory publication, ranking, recovery."""
