"""The Engine: trains and measures the target model under the frozen configuration."""
