"""seamscope's version, in a module of its own: modules inside the package read it from here,
so that none of them imports the package itself (which imports some of them, lazily)."""

__version__ = "0.1.0"
