"""Only for the optional C hot path; everything else is in pyproject.toml.

``optional=True``: without a compiler the install still succeeds and seamscope uses its
pure-Python equivalents (slower capture, same figures).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "seamscope._speedups",
            sources=["src/seamscope/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "seamscope._logscan",
            sources=["src/seamscope/_logscan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
