"""Patches of the user's script, torch-free: every written patch round-trips through ``git apply``
(and ``patch -p1``), the patched file parses, and ``run --patch``'s own applier gives the same text."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seamscope.errors import UnusableInput
from seamscope.experiments.remedy_spec import spec_from_words
from seamscope.experiments.trials.patches import spec_patch
from seamscope.experiments.unified_diff import apply, make, parse

GIT = shutil.which("git")
PATCH = shutil.which("patch")

COMPILES = [
    'f = torch.compile(step, backend="eager")\n',
    "f = torch.compile(step)\n",
    "f = torch.compile(\n    step,\n    backend='eager',\n    dynamic=False,\n)\n",
    'f = torch.compile(step, mode="default")  # é, a comment\n',
]
SPECS = [
    ["--compile-option", "dynamic=true"],
    ["--compile-option", "dynamic=true", "--compile-option", "fullgraph=true"],
    ["--dynamo-config", "recompile_limit=64"],
    ["--dynamo-config", "capture_scalar_outputs=True", "--mark-dynamic", "L['x']:0"],
    ["--dynamo-config", "reorderable_logging_functions+=builtins:print"],
    ["--stance", "eager_then_compile"],
    ["--disable", "__main__:helper"],
    ["--mark-dynamic", "L['x']:0", "--mark-dynamic", "L['args'][0]:1"],
]

#: Characters ``str.splitlines`` splits at that end no line for Python's tokenizer or ``git apply``.
ODD_LINES = [
    "# a form feed \x0c in a comment\n",
    's = "a line separator \u2028 and a paragraph separator \u2029 in a string"\n',
    "t = '\x1c\x1d\x1e and \x85'  # group separators, next line\n",
]


@st.composite
def scripts(draw):
    parts = []
    if draw(st.booleans()):
        parts.append('"""A script."""\n')
    if draw(st.booleans()):
        parts.append("import os\n")
    parts.append("import torch\n" if draw(st.booleans()) else "import torch.nn as nn\nimport torch\n")
    if draw(st.booleans()):
        parts.append("\ntorch._dynamo.config.recompile_limit = 4\n")
    parts.append("\n\ndef helper(x):\n    return x * 2\n")
    if draw(st.booleans()):
        parts.append("\n\n@torch.compile\ndef other(x):\n    return x + 1\n")
    parts.append("\n\ndef step(x):\n    return helper(x).sum()\n\n\n")
    parts.extend(draw(st.lists(st.sampled_from(ODD_LINES), max_size=3)))
    parts.append(draw(st.sampled_from(COMPILES)))
    parts.append("f(torch.ones(3))")
    return "".join(parts) + ("\n" if draw(st.booleans()) else "")


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=scripts(), words=st.sampled_from(SPECS))
def test_every_written_patch_round_trips(tmp_path_factory, text, words):
    d = tmp_path_factory.mktemp("repo")
    script = d / "script.py"
    script.write_text(text, encoding="utf-8")
    here = os.getcwd()
    os.chdir(d)
    try:
        patch = spec_patch(spec_from_words(words), "script.py")
    finally:
        os.chdir(here)
    assert patch is not None and patch.path == "script.py"
    (d / "p.patch").write_text(patch.diff, encoding="utf-8")
    mine = apply(text, parse(patch.diff)[0])
    ast.parse(mine)
    subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    subprocess.run(["git", "apply", "--check", "p.patch"], cwd=d, check=True)
    subprocess.run(["git", "apply", "p.patch"], cwd=d, check=True)
    assert script.read_text(encoding="utf-8") == mine
    if PATCH is not None:
        script.write_text(text, encoding="utf-8")
        subprocess.run(["patch", "-p1", "-s", "-i", "p.patch"], cwd=d, check=True)
        assert script.read_text(encoding="utf-8") == mine


@given(old=st.lists(st.sampled_from(["a\n", "b\n", "\n", "c = 1\n", "é\n"]), max_size=12),
       new=st.lists(st.sampled_from(["a\n", "b\n", "\n", "d = 2\n"]), max_size=12),
       tail=st.sampled_from(["", "end", "end\n"]))
def test_make_then_apply_gives_the_new_text(old, new, tail):
    a, b = "".join(old) + tail, "".join(new) + ("x" if tail == "end" else tail)
    diff = make(a, b, "f.py")
    assert apply(a, parse(diff)[0]) == b if diff else a == b


def test_a_patch_that_does_not_match_the_file_is_refused_with_its_line():
    diff = make("a\nb\nc\n", "a\nB\nc\n", "f.py")
    with pytest.raises(UnusableInput, match="does not apply at line 1"):
        apply("x\nb\nc\n", parse(diff)[0])
    with pytest.raises(UnusableInput, match="holds no file"):
        parse("not a diff\n")


def test_what_cannot_be_a_patch_gets_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("import torch\nopts = {}\nf = torch.compile(abs, **opts)\n")
    assert spec_patch(spec_from_words(["--compile-option", "dynamic=true"]), "s.py") is None  # **options
    assert spec_patch(spec_from_words(["--regional", "Block"]), "s.py") is None
    assert spec_patch(spec_from_words(["--disable", "helpers:noisy"]), "s.py") is None  # no such module beside it
    (tmp_path / "t.py").write_text("import torch\nc = torch.compile\nf = c(abs)\n")
    assert spec_patch(spec_from_words(["--compile-option", "dynamic=true"]), "t.py") is None  # passed around


def test_a_patch_is_shown_as_text_in_every_table():
    """The diff is the user's code: inert on the terminal, escaped in HTML, fenced past its own
    backticks in Markdown."""
    import msgspec
    from hostile import HOSTILE, assert_inert, hostile_trials, printed

    from seamscope.render.trials_table import (
        TrialsHtmlRenderer,
        TrialsMarkdownRenderer,
        TrialsTerminalRenderer,
    )

    t = hostile_trials()
    diff = f"--- a/s.py\n+++ b/s.py\n@@ -1 +1 @@\n-a{HOSTILE}\n+b = '</pre><script>x</script>'  # ```\n"
    cand = msgspec.structs.replace(t.candidates[0], patch="o/trials/p.patch", diff=diff, review="r" + HOSTILE)
    t = msgspec.structs.replace(t, candidates=[cand])
    out = printed(lambda c: TrialsTerminalRenderer(c).print(t))
    assert_inert(out)
    assert "patch: o/trials/p.patch (from the project root: git apply o/trials/p.patch)" in out
    assert "+b = '</pre><script>x</script>'" in out and "review before applying: r" in out
    md = TrialsMarkdownRenderer().render(t)
    assert_inert(md)
    assert "````diff\n--- a/s.py" in md and "\n````\n" in md
    html = TrialsHtmlRenderer().render_section(t)
    assert "<script>" not in html and "&lt;/pre&gt;&lt;script&gt;" in html and "<details open>" in html


STATEMENTS = [
    ["print('x', x.shape)"],
    ["log.info('done %s', x)"],
    ["warnings.warn('slow')"],
    ["print(", "    'a multi-line call',", "    x.shape,", ")"],
    ["print('two'); y = x"],
    ["if x.sum().item() > 0:", "    z = x * 2", "else:", "    z = x - 1"],
    ["if bool(x.max() > 1):", "    x = x + 1", "else:", "    x = x - 1"],
    ["if x.sum() > 0:", "    y = x * 2", "    x = y + 1", "else:", "    y = x - 1", "    x = y * y"],
    ["y = x + 1  # é"],
    ['print("""a', 'string""")'],
]


@st.composite
def rewrite_scripts(draw):
    picks = draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=5))
    nested = draw(st.booleans())
    body = []
    for stmt in picks:
        pad = "        " if nested else "    "
        body += [pad + ln for ln in stmt]
    head = ["import logging", "import warnings", ""] + ([] if draw(st.booleans()) else ["import torch"]) + [
        "log = logging.getLogger(__name__)", "", "", "def step(x):"]
    if nested:
        head.append("    for _ in range(2):")
    lines = head + body + ["    return x", ""]
    breaks = draw(st.sets(st.integers(1, len(lines)), max_size=6))
    if draw(st.booleans()):  # the ifs' own lines too, where the branch rewrites apply
        breaks |= {i for i, ln in enumerate(lines, 1) if ln.lstrip().startswith("if ")}
    return "\n".join(lines) + "\n", breaks


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=rewrite_scripts())
def test_every_code_change_patch_round_trips(tmp_path_factory, case):
    """The code-change rewrites on any break lines: each diff applies with git and parses."""
    from types import SimpleNamespace

    from seamscope.experiments.trials.rewrites import rewrites

    text, lines = case
    d = tmp_path_factory.mktemp("rw")
    (d / "s.py").write_text(text, encoding="utf-8")
    receipt = SimpleNamespace(findings=None, ledger=SimpleNamespace(break_sites=[
        SimpleNamespace(file="s.py", line=n, site_id=f"B{n}") for n in sorted(lines)]))
    here = os.getcwd()
    os.chdir(d)
    try:
        drafts = rewrites(receipt, "s.py")  # type: ignore[arg-type]
    finally:
        os.chdir(here)
    if drafts:
        subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    for dr in drafts:
        assert dr.diff and dr.review
        (d / "p.patch").write_text(dr.diff, encoding="utf-8")
        subprocess.run(["git", "apply", "--check", "p.patch"], cwd=d, check=True)
        patched = apply(text, parse(dr.diff)[0])
        ast.parse(patched)
        assert "torch.compiler.is_compiling()" in patched or "torch.where(" in patched or "torch.cond(" in patched
        assert patched.count("import torch") == 1


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_in_a_git_work_tree_the_patch_is_made_from_its_top_and_applies_from_a_subfolder(tmp_path, monkeypatch):
    """``git apply`` below a work tree's top silently skips a path outside the current folder: the
    patch names the file from the top, which applies from the top and from the script's folder,
    and ``run --patch`` finds it from there too."""
    from seamscope.experiments.remedy_plan import prepare

    (tmp_path / "sub").mkdir()
    text = "import torch\nf = torch.compile(abs)\n"
    (tmp_path / "sub" / "s.py").write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path / "sub")
    patch = spec_patch(spec_from_words(["--compile-option", "dynamic=true"]), "s.py")
    assert patch is not None and patch.path == "sub/s.py" and "+++ b/sub/s.py" in patch.diff
    (tmp_path / "sub" / "p.patch").write_text(patch.diff)
    plan = prepare(spec_from_words(["--patch", "p.patch"]), "s.py")
    assert plan.remedies.source == "import torch\nf = torch.compile(abs, dynamic=True)\n"
    subprocess.run(["git", "apply", "p.patch"], cwd=tmp_path / "sub", check=True)
    assert (tmp_path / "sub" / "s.py").read_text() == plan.remedies.source
