"""Reports name the user's frame where the compiled one is a generic wrapper (torch-free).

GIVEN the frames and module a compilation's graphs were traced under (what
``adapter.graph_origin`` reads from the FX nodes), WHEN ``naming.recognisable_frame`` picks the
frame to name, THEN a decorator's ``wrapper``, torch's ``inner`` and a library's ``forward`` give
way to the user's function or module, and a user's own frame keeps its name. GIVEN a receipt whose
compilations carry a ``user_frame``, THEN the terminal and HTML reports name it, while ids and
the structure hash stay those of the compiled frame.
"""

from __future__ import annotations

import msgspec
import pytest
from fakes import fake_ledger

from seamscope.analyze.receipt import make_receipt
from seamscope.gates.budget import Budget, evaluate
from seamscope.gates.check import Limits, check
from seamscope.ingest.naming import (
    common_chain,
    graph_frames,
    is_wrapper,
    recognisable_frame,
    self_class,
    trace_module,
    trace_origin,
)
from seamscope.model.ledger import Frame
from seamscope.render.html import HtmlRenderer
from seamscope.render.terminal import TerminalRenderer

CWD = "/home/u/proj"
LIB = "/venv/lib/python3.11/site-packages"


def _origin(*chain: tuple[str, int, str], module: dict | None = None) -> dict:
    return {"chain": list(chain), "module": module}


def test_a_decorators_wrapper_is_named_after_the_function_it_wraps(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("import functools\n\n\n@logged\ndef step(x):\n    y = x.sin()\n    return y * 2\n")
    origin = _origin((f"{CWD}/deco.py", 6, "wrapper"), (str(src), 6, "step"))
    origin2 = _origin((f"{CWD}/deco.py", 6, "wrapper"), (str(src), 7, "step"))
    got = recognisable_frame("wrapper", "deco.py", 1, [origin, origin2], CWD)
    # the def's first line is its decorator's, as co_firstlineno
    assert got == Frame(file=str(src), line=4, function="step")


def test_torchs_inner_is_named_after_the_module_every_node_sits_in() -> None:
    module = {"cls": "Sequential", "file": f"{LIB}/torch/nn/modules/container.py", "line": 248}
    got = recognisable_frame("inner", "site-packages/torch/_dynamo/external_utils.py", 1, [_origin(module=module)], CWD)
    assert got == Frame(file="site-packages/torch/nn/modules/container.py", line=248, function="Sequential.forward")


def test_a_module_whose_own_nodes_carry_no_stack_is_named_not_the_helper_that_has_one() -> None:
    """nn.TransformerEncoder's eval fast path: PyTorch leaves its own frames out of the nodes'
    stacks, so the encoder layers' nodes carry none, and the only frames named are those of the
    three nodes F._canonical_mask made; the module every node sits in names the compilation."""
    module = {"cls": "TransformerEncoder", "file": f"{LIB}/torch/nn/modules/transformer.py", "line": 405}
    helper = (f"{LIB}/torch/nn/functional.py", 6593, "_canonical_mask")
    got = recognisable_frame("inner", "site-packages/torch/_dynamo/external_utils.py", 67,
                             [_origin(helper, module=module)], CWD)
    assert got == Frame(file="site-packages/torch/nn/modules/transformer.py", line=405,
                        function="TransformerEncoder.forward")
    # a log names the module by the class of the `fn` torch's own wrapper calls, not its tensor argument
    guards = GUARDS.replace("pkg.model.Block", "torch.Tensor") + (
        "| +- GuardManager: source=L['fn'], accessed_by=FrameLocalsGuardAccessor(key='fn', framelocals_idx=2), "
        "type=<class 'torch.nn.modules.transformer.TransformerEncoder'>, tag_safe=(False, False)\n")
    assert self_class(guards) == "torch.nn.modules.transformer.TransformerEncoder"


def test_a_library_frame_gives_way_to_the_users_code_below_it(tmp_path) -> None:
    user = tmp_path / "model.py"
    user.write_text("class Net:\n    def forward(self, x):\n        return x\n")
    chain = [(f"{LIB}/lib/wrap.py", 30, "forward"), (f"{LIB}/lib/wrap.py", 12, "wrapper"), (str(user), 3, "forward")]
    got = recognisable_frame("forward", "site-packages/lib/wrap.py", 1, [_origin(*chain)], CWD)
    assert got == Frame(file=str(user), line=2, function="Net.forward")


def test_a_library_wrapper_over_library_code_names_the_method_below_it(tmp_path) -> None:
    lib = tmp_path / "site-packages" / "diffusers"
    lib.mkdir(parents=True)
    (lib / "unet.py").write_text("class UNet:\n    def forward(self, x):\n        h = x\n        return h\n")
    chain = [(f"{LIB}/diffusers/peft_utils.py", 9, "wrapper"), (str(lib / "unet.py"), 3, "forward")]
    got = recognisable_frame("wrapper", "site-packages/diffusers/peft_utils.py", 1, [_origin(*chain)], CWD)
    assert got == Frame(file="site-packages/diffusers/unet.py", line=2, function="UNet.forward")


def test_a_user_frame_of_a_telling_name_or_a_wrapper_name_with_nothing_below_keeps_its_own() -> None:
    assert recognisable_frame("forward", "model.py", 1, [_origin((f"{CWD}/model.py", 3, "forward"))], CWD) is None
    # the user's own function called "wrapper", which traced its own ops
    assert recognisable_frame("wrapper", "mine.py", 1, [_origin((f"{CWD}/mine.py", 2, "wrapper"))], CWD) is None
    assert recognisable_frame("wrapper", "mine.py", 1, [], CWD) is None


def test_a_library_method_without_a_graph_is_named_with_its_class(tmp_path, monkeypatch) -> None:
    site = tmp_path / "site-packages"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "layers.py").write_text(
        "class Layer:\n    def forward(self, x):\n        return x\n\n\ndef helper(x):\n    return x\n"
    )
    monkeypatch.syspath_prepend(str(site))
    assert recognisable_frame("forward", "site-packages/lib/layers.py", 2, [], CWD) == Frame(
        file="site-packages/lib/layers.py", line=2, function="Layer.forward")
    # a function says no more than its name; a wrapper without a graph has nothing to show
    assert recognisable_frame("helper", "site-packages/lib/layers.py", 6, [], CWD) is None
    assert recognisable_frame("wrapper", "site-packages/lib/layers.py", 2, [], CWD) is None


GRAPH = """class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[4][1]cpu"):
        # File: {model}:7 in forward, code: h = self.lin(x)
        linear = torch._C._nn.linear(l_x_, w, b)
        # File: {model}:10 in mix, code: return h * 2
        mul = linear * 2
        # No stacktrace found for following nodes
        return (mul,)
"""
GUARDS = """TREE_GUARD_MANAGER:
+- RootGuardManager
| +- GuardManager: source=L['args'], accessed_by=FrameLocalsGuardAccessor(key='args', framelocals_idx=0), type=<class 'tuple'>, tag_safe=(True, False)
| | +- GuardManager: source=L['args'][0], accessed_by=TupleGetItemGuardAccessor(0), type=<class 'pkg.model.Block'>, tag_safe=(False, False)
"""  # noqa: E501


def test_a_logs_graph_and_guards_name_a_wrapper_as_live_capture_does(tmp_path) -> None:
    """What a ``TORCH_TRACE`` log keeps: each node's innermost frame, and the class of the frame's
    ``self`` (``args[0]`` of a ``*args`` wrapper); ``Block.forward`` is found in its file."""
    model = tmp_path / "pkg" / "model.py"
    model.parent.mkdir()
    model.write_text("class Block:\n    @deco\n    def forward(self, x):\n        pass\n\n\n"
                     "        h = self.lin(x)\n\n    def mix(self, h):\n        return h * 2\n")
    frames = graph_frames(GRAPH.format(model=model))
    assert frames == [(str(model), 7, "forward"), (str(model), 10, "mix")]
    assert self_class(GUARDS) == "pkg.model.Block"
    module = trace_module("pkg.model.Block", ["/x/other.py", str(model)], [], CWD)
    assert module == {"cls": "Block", "file": str(model), "line": 2}
    assert trace_module("pkg.model.Missing", [str(model)], [], CWD) is None
    # __main__: the script among the stack's module-level files, whichever defines the class
    assert trace_module("__main__.Block", [], ["/x/launcher.py", str(model)], CWD) == module
    got = recognisable_frame("wrapper", "deco.py", 1, [trace_origin(frames, module)], CWD)
    assert got == Frame(file=str(model), line=2, function="Block.forward")
    # every node in one function: that function, as the chain live capture reads gives it
    one = recognisable_frame("wrapper", "deco.py", 1, [trace_origin(frames[1:], None)], CWD)
    assert one == Frame(file=str(model), line=9, function="Block.mix")


def test_graphs_that_diverge_below_the_wrapper_name_nothing_below_it() -> None:
    a = _origin((f"{CWD}/deco.py", 6, "wrapper"), (f"{CWD}/m.py", 3, "f"))
    b = _origin((f"{CWD}/deco.py", 6, "wrapper"), (f"{CWD}/m.py", 9, "g"))
    assert recognisable_frame("wrapper", "deco.py", 1, [a, b], CWD) is None
    assert common_chain([a["chain"], b["chain"]]) == [(f"{CWD}/deco.py", 6, "wrapper")]


def test_resume_functions_of_a_wrapper_are_wrappers_and_torchs_files_are_too() -> None:
    assert is_wrapper("torch_dynamo_resume_in_wrapper_at_6", "deco.py")
    assert is_wrapper("anything", "site-packages/torch/_dynamo/external_utils.py")
    assert not is_wrapper("step", "train.py")


def _wrapped_ledger():
    led = fake_ledger()
    uf = Frame(file="model.py", line=12, function="Net.forward")
    comps = [msgspec.structs.replace(c, frame_name="wrapper", file="site-packages/lib/deco.py", line=5, user_frame=uf)
             for c in led.compilations]
    return led, msgspec.structs.replace(led, compilations=comps)


def test_reports_name_the_users_frame_and_ids_and_hashes_stay_the_compiled_frames() -> None:
    led, named = _wrapped_ledger()
    bare = msgspec.structs.replace(
        named, compilations=[msgspec.structs.replace(c, user_frame=None) for c in named.compilations])
    r, r_bare = make_receipt(named), make_receipt(bare)
    text = TerminalRenderer().render(r)
    assert "Net.forward" in text and "wrapper" not in text
    assert "wrapper" in TerminalRenderer().render(r_bare)  # the name reports showed before
    html = HtmlRenderer().render(r)
    assert "Net.forward (model.py:12)" in html
    assert r.summary.recompiles and all(x.user_frame is not None for x in r.summary.recompiles)
    assert r.structure_sha256 == r_bare.structure_sha256
    ids = [f.finding_id for f in r.findings.findings] if r.findings else []
    assert ids == ([f.finding_id for f in r_bare.findings.findings] if r_bare.findings else [])
    assert [c.cause_id for c in r.findings.causes] == [c.cause_id for c in r_bare.findings.causes]


def test_ci_gates_name_the_users_frame_too() -> None:
    _, named = _wrapped_ledger()
    lines = check(make_receipt(named), Limits(max_recompiles=0)).lines
    assert any("Net.forward (model.py:12): failed guard" in ln for ln in lines)
    result = evaluate(Budget(recompiles=0), named, named.calls)
    assert result.recompiles and all("Net.forward (model.py:12)" in r.line_text() for r in result.recompiles)


# --- where a file a receipt names is, here (one lookup for the report's source and the frame names) --


def test_a_receipts_file_name_is_found_where_normalize_path_took_it_from(tmp_path, monkeypatch):
    import sys

    from seamscope.model.normalize import local_file, normalize_path

    # GIVEN a run's folder with a script, and an installed package's file in a site-packages folder
    root, site = tmp_path / "run", tmp_path / "env" / "lib" / "site-packages"
    (root / "pkg").mkdir(parents=True)
    (site / "lib_x").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text("x = 1\n")
    (site / "lib_x" / "mod.py").write_text("y = 2\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    # WHEN their receipt names are looked up  THEN each is the file it was made from
    for path in (root / "pkg" / "train.py", site / "lib_x" / "mod.py"):
        name = normalize_path(str(path), str(root))
        assert not name.startswith("/") and local_file(name, str(root)) == str(path)
    # and what is not here is None: another machine's absolute path, a missing file, <string>, a NUL
    for name in ("/nonexistent/a.py", "pkg/nope.py", "site-packages/lib_x/nope.py", "<string>", "a\0b.py", ""):
        assert local_file(name, str(root)) is None


@pytest.mark.parametrize(("path", "package", "rest"), [
    ("site-packages/transformers/models/x.py", "transformers", "transformers/models/x.py"),
    ("/venv/lib/python3.11/site-packages/six.py", "six", "six.py"),
    ("/usr/lib/python3/dist-packages/numpy/core.py", "numpy", "numpy/core.py"),
    ("/usr/lib/python3.11/collections/__init__.py", "collections", "collections/__init__.py"),
    ("/opt/py/lib/python3.13t/contextlib.py", "contextlib", "contextlib.py"),
    ("<frozen importlib._bootstrap>", "importlib", "importlib/_bootstrap"),
    ("train.py", None, None),
    ("/home/me/proj/lib/model.py", None, None),
    ("<string>", None, None),
    ("/home/me/my-site-packages/x.py", None, None),
])
def test_one_rule_says_what_is_library_code(path, package, rest) -> None:
    from seamscope.model.normalize import is_library, library_path, package_of

    assert (library_path(path), package_of(path), is_library(path)) == (rest, package, package is not None)
