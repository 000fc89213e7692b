"""seamscope.gates."""
