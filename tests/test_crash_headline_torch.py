"""A run that raises inside compilation is said as it is: the run ended in the compilation of F,
and an eager run tells a program error from a compiler one; "runs eagerly instead" only when the
call went on without the compiled code. Real torch, the eager backend, one tiny function each."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from seamscope.analyze.findings import analyze_findings  # noqa: E402
from seamscope.capture.session import session  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def stack_nothing(x):
    """A program error: ``torch.stack`` of an empty list fails eagerly too."""
    return torch.stack([t for t in x.split(1) if t.numel() > 1])


def fine(x):
    return torch.relu(x) + 1


def exploding_backend(gm, example_inputs):
    raise RuntimeError("backend exploded")


def _headline(fn, backend):
    cf = torch.compile(fn, backend=backend)
    with session() as s:
        with pytest.raises(Exception) as info:
            cf(torch.ones(3))
    return info.value, analyze_findings(s.ledger).headline.sentence


def test_a_program_error_raised_in_compilation_ends_the_run_there():
    with pytest.raises(RuntimeError, match="non-empty"):
        stack_nothing(torch.ones(3))  # fails eagerly too: the program's error
    err, sentence = _headline(stack_nothing, "eager")
    assert type(err).__name__ == "TorchRuntimeError"
    assert sentence.startswith("The run ended in the compilation of stack_nothing (")
    assert "stack expects a non-empty TensorList" in sentence  # the op's own message, not only Dynamo's
    assert "run it eagerly to tell them apart (`seamscope probe` does)" in sentence
    assert "runs eagerly instead" not in sentence


def test_a_compiler_error_ends_the_run_there_too():
    assert torch.equal(fine(torch.ones(3)), torch.full((3,), 2.0))  # works eagerly: the compiler's error
    err, sentence = _headline(fine, exploding_backend)
    assert type(err).__name__ == "BackendCompilerFailed"
    assert sentence.startswith("The run ended in the compilation of fine (")
    assert "RuntimeError: backend exploded" in sentence
    assert "runs eagerly instead" not in sentence


def test_a_suppressed_compiler_error_runs_eagerly_instead():
    cf = torch.compile(fine, backend=exploding_backend)
    with torch._dynamo.config.patch(suppress_errors=True), session() as s:
        out = cf(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 2.0))
    sentence = analyze_findings(s.ledger).headline.sentence
    assert sentence.startswith("Dynamo crashed compiling fine (")
    assert "which runs eagerly instead: BackendCompilerFailed" in sentence
