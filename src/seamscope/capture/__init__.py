"""seamscope.capture."""
