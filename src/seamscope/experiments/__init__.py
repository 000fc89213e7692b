"""seamscope.experiments."""
