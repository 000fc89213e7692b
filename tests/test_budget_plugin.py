"""The ``compile_budget`` marker, through pytester: real ``torch.compile`` (backend eager)."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.torch

CONFTEST = """
import pytest, torch

@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
"""

HEADER = """
import pytest, torch

def clean(x):
    return (x * 2).sin() + 1

def chatty(x):
    x = x * 2
    print("step")  # PRINT_LINE
    return x + 1
"""


@pytest.fixture(scope="module")
def torch_warm() -> None:
    """Import and exercise torch once, in this process, before any inline run.

    pytester restores ``sys.modules`` after each inline run; a torch (sub)module first imported
    inside one would be dropped and re-imported broken. After one warm-up compile through a budget
    (a break, a recompile), the scenarios below import nothing new.
    """
    import torch

    from seamscope.gates.budget import BudgetExceeded, budget

    def chatty(x: torch.Tensor) -> torch.Tensor:
        print("warm-up")
        return x + 1

    torch._dynamo.reset()
    with pytest.raises(BudgetExceeded):
        with budget(breaks=0, recompiles=0, fallbacks=0):
            f = torch.compile(chatty, backend="eager")
            for n in (4, 4, 6):
                f(torch.ones(n))
    torch._dynamo.reset()


def _run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_model=HEADER)  # first the header alone: where its print sits
    body = textwrap.dedent(body).replace("PRINT_AT", f"test_model.py:{_print_line(pytester)}")
    pytester.makepyfile(test_model=HEADER + body)
    return pytester.runpytest("-p", "no:cacheprovider", "-q", "-s", *args)


def _print_line(pytester: pytest.Pytester) -> int:
    text = (pytester.path / "test_model.py").read_text()
    return next(i for i, ln in enumerate(text.splitlines(), 1) if "PRINT_LINE" in ln)


@pytest.mark.usefixtures("torch_warm")
def test_a_test_within_its_budget_passes(pytester: pytest.Pytester) -> None:
    r = _run(pytester, """
        @pytest.mark.compile_budget(breaks=0, recompiles=0, fallbacks=0, phase="steady")
        def test_it():
            f = torch.compile(clean, backend="eager")
            for _ in range(3):
                f(torch.ones(4))
    """, "--seamscope-out", "receipts")
    r.assert_outcomes(passed=1)
    # The budget's own receipt, for `seamscope check` or as a CI artifact.
    from seamscope.ingest.receipt import load_receipt

    receipt = load_receipt(pytester.path / "receipts" / "test_model.py_test_it")
    assert receipt.summary.call_count == 3
    assert receipt.summary.calls_by_phase["steady"] == 2


@pytest.mark.usefixtures("torch_warm")
def test_a_new_print_break_fails_naming_its_site(pytester: pytest.Pytester) -> None:
    r = _run(pytester, """
        @pytest.mark.compile_budget(breaks=0, phase="steady")
        def test_it():
            f = torch.compile(chatty, backend="eager")
            for _ in range(3):
                f(torch.ones(4))
    """)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines([
        "*BudgetExceeded: compile budget exceeded: budget(breaks=0, phase='steady')*",
        "*1 break site(s) crossed, over the budget breaks=0*",
        f"*B???????? *test_model.py:{_print_line(pytester)} in chatty ?GB0059?*print*crossed 2x*",
    ])


@pytest.mark.usefixtures("torch_warm")
def test_a_shape_recompile_in_the_steady_phase_fails_naming_the_failed_guard(
    pytester: pytest.Pytester,
) -> None:
    r = _run(pytester, """
        @pytest.mark.compile_budget(recompiles=0, phase="steady")
        def test_it():
            f = torch.compile(clean, backend="eager")
            f(torch.ones(4))
            f(torch.ones(4))
            f(torch.ones(6))
    """)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines([
        "*1 recompile(s), over the budget recompiles=0*",
        "*0/1 clean (test_model.py:*) in call 2: failed guard:*tensor 'x' size mismatch at index 0*",
    ])


@pytest.mark.usefixtures("torch_warm")
def test_an_allow_listed_break_passes(pytester: pytest.Pytester) -> None:
    r = _run(pytester, """
        @pytest.mark.compile_budget(breaks=0, phase="steady", allow=["PRINT_AT"])
        def test_it():
            f = torch.compile(chatty, backend="eager")
            f(torch.ones(4))
            f(torch.ones(4))
    """)
    r.assert_outcomes(passed=1)


@pytest.mark.usefixtures("torch_warm")
def test_a_model_compiled_before_the_budget_is_observed(pytester: pytest.Pytester) -> None:
    r = _run(pytester, """
        torch._dynamo.reset()
        compiled = torch.compile(chatty, backend="eager")
        compiled(torch.ones(4))  # compiled and called at import time, before any budget
        tidy = torch.compile(clean, backend="eager")

        class Block(torch.nn.Module):
            def forward(self, x):
                return (x + 1).relu()

        block = Block()
        block.compile(backend="eager")

        @pytest.mark.compile_budget(breaks=0)
        def test_breaks():
            compiled(torch.ones(4))

        @pytest.mark.compile_budget(breaks=0, recompiles=0, phase="steady")
        def test_clean():
            for _ in range(3):
                tidy(torch.ones(4))
                block(torch.ones(4))
    """)
    r.assert_outcomes(failed=1, passed=1)
    r.stdout.fnmatch_lines(["*1 break site(s) crossed, over the budget breaks=0*"])
    assert "no compiled call was observed" not in r.stdout.str()


@pytest.mark.usefixtures("torch_warm")
def test_a_model_compiled_in_a_function_fixture_is_observed(pytester: pytest.Pytester) -> None:
    r = _run(pytester, """
        @pytest.fixture
        def model():
            return torch.compile(chatty, backend="eager")

        @pytest.mark.compile_budget(breaks=0)
        def test_it(model):
            model(torch.ones(4))
    """)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*in chatty ?GB0059?*"])


@pytest.mark.usefixtures("torch_warm")
def test_a_failing_test_body_is_reported_as_itself(pytester: pytest.Pytester) -> None:
    r = _run(pytester, """
        @pytest.mark.compile_budget(breaks=0)
        def test_it():
            assert 1 == 2, "the test's own failure"
    """)
    r.assert_outcomes(failed=1)
    assert "the test's own failure" in r.stdout.str()
    assert "BudgetExceeded" not in r.stdout.str()


MALFORMED = {
    "positional": ("compile_budget(0)", "keyword arguments only"),
    "phase": ("compile_budget(breaks=0, phase='warm')", "unknown phase"),
    "typo": ("compile_budget(brakes=0)", "unknown argument(s) brakes"),
    "negative": ("compile_budget(breaks=-1)", "whole number"),
    "empty": ("compile_budget()", "checks nothing"),
}


def test_a_malformed_marker_errors_clearly_never_passes(pytester: pytest.Pytester) -> None:
    src = ["import pytest"]
    for name, (marker, _) in MALFORMED.items():
        src += ["", f"@pytest.mark.{marker}", f"def test_{name}():", "    pass"]
    pytester.makepyfile(test_bad="\n".join(src))
    r = pytester.runpytest("-p", "no:cacheprovider", "-q")
    r.assert_outcomes(errors=len(MALFORMED))
    for name, (_, words) in MALFORMED.items():
        r.stdout.fnmatch_lines([f"*@pytest.mark.compile_budget on test_bad.py::test_{name}: *{words}*"])


def test_the_plugin_is_inert_unless_used(pytester: pytest.Pytester) -> None:
    # A fresh process: the plugin is loaded (entry point) but neither torch nor the budget is.
    pytester.makepyfile(test_plain="""
        import sys

        def test_it(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("seamscope")
            assert "torch" not in sys.modules
            assert "seamscope.gates.budget" not in sys.modules
            assert any(m.startswith("compile_budget(") for m in pytestconfig.getini("markers"))
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    r.assert_outcomes(passed=1)
