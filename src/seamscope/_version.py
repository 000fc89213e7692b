"""The version, in a module of its own so that every part can import it without importing the package's
``__init__`` (which imports parts of the package lazily: a cycle otherwise)."""

__version__ = "0.1.0"
