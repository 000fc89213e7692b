"""Small helpers the analyses share: building a record from another's fields, a config remedy and
its command, a resume function's stable name."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from seamscope.analyze.fields import carry
from seamscope.analyze.findings_common import PROBE, config_remedy, frame_label, stable_frame
from seamscope.model.ledger import Compilation
from seamscope.model.receipt import FallbackSummary, RecompileSummary


@dataclass(frozen=True)
class Row:
    compile_id: str
    frame: str
    call_index: int | None


def test_carry_takes_same_named_fields_and_the_given_ones():
    c = Compilation(compile_id="0/1", frame_name="forward", file="m.py", line=3, status="ok", call_index=4,
                    failed_guards=["L['x'].size()[0] == 4"])
    r = carry(RecompileSummary, c)
    assert r == RecompileSummary(compile_id="0/1", frame_name="forward", file="m.py", line=3,
                                 failed_guards=["L['x'].size()[0] == 4"], call_index=4, status="ok")
    assert carry(Row, r, frame="f") == Row("0/1", "f", 4)  # a dataclass too
    assert carry(FallbackSummary, c, reason="r").reason == "r"


def test_carry_refuses_a_field_the_source_lacks_or_the_target_does_not_have():
    c = Compilation(compile_id="0/1", frame_name="forward", file="m.py", line=3, status="ok")
    with pytest.raises(AttributeError, match="frame"):
        carry(Row, c)  # Compilation has no ``frame``
    with pytest.raises(TypeError, match="no field framename"):
        carry(Row, c, frame="f", framename="f")


def test_config_remedy_names_the_setting_and_the_command_that_tries_it():
    r = config_remedy("capture_scalar_outputs", "t", "capture_scalar_outputs", "True", hints=["h"])
    assert r.config == {"capture_scalar_outputs": "True"} and r.torch_hints == ["h"]
    assert r.try_with == f"{PROBE} --dynamo-config capture_scalar_outputs=True"
    add = config_remedy("reorder_logging", "t", "reorderable_logging_functions", "print", add=True)
    assert add.config == {"reorderable_logging_functions": "add print"} and add.torch_hints == []
    assert add.try_with == f"{PROBE} --dynamo-config reorderable_logging_functions+=print"


def test_stable_frame_drops_only_a_resume_function_line():
    assert stable_frame("torch_dynamo_resume_in_forward_at_12") == "torch_dynamo_resume_in_forward"
    assert stable_frame("torch_dynamo_resume_in_my_fn_at_7") == "torch_dynamo_resume_in_my_fn"
    assert stable_frame("forward_at_12") == "forward_at_12"
    assert frame_label("f", "/x/site-packages/transformers/m.py", 9) == "f (transformers/m.py:9)"
