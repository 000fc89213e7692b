"""seamscope.examples."""
