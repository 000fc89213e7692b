"""The remedy flags, described once (``remedy_spec.FLAGS``): the command line's options and the
torch-free parser of a candidate's words read them alike."""

from __future__ import annotations

import click
import pytest

from seamscope.commands.options import remedy_options
from seamscope.errors import UnusableInput
from seamscope.experiments.remedy_spec import FLAGS, RemedySpec, spec_from_options, spec_from_words


@click.command()
@remedy_options
def _cli(**kw: object) -> RemedySpec:
    return spec_from_options(**kw)  # type: ignore[arg-type]


def _click(words: list[str]) -> RemedySpec:
    rv = _cli.main(args=list(words), standalone_mode=False)
    assert isinstance(rv, RemedySpec)
    return rv


WORDS = [
    [],
    ["--dynamo-config", "capture_scalar_outputs=True", "--dynamo-config", "recompile_limit=64"],
    ["--compile-option=dynamic=true", "--mark-dynamic", "L['x']:0", "--stance", "force_eager"],
    ["--disable", "m:f", "--regional", "Block", "--seed", "7", "--pad", "buckets:8,16"],
    ["--seed=-3", "--regional=A", "--regional", "B"],
]


@pytest.mark.parametrize("words", WORDS)
def test_the_parser_reads_words_as_the_command_line_does(words):
    # GIVEN remedy words  WHEN parsed by click's options and by the torch-free parser  THEN one spec
    assert spec_from_words(words) == _click(words)
    assert spec_from_words(spec_from_words(words).flags()) == spec_from_words(words)


@pytest.mark.parametrize("words, message", [
    (["--bogus", "1"], "No such option '--bogus'."),
    (["--seed"], "Option '--seed' requires an argument."),
    (["--seed", "x"], "Invalid value for '--seed': 'x' is not a valid integer."),
    (["stray"], "Got unexpected extra argument (stray)"),
    (["--no-html"], "No such option '--no-html'."),  # run's own flag, not a remedy
])
def test_bad_words_are_unusable_input_with_clicks_message(words, message):
    with pytest.raises(click.ClickException) as clicked:
        _click(words)
    with pytest.raises(UnusableInput) as ours:
        spec_from_words(words)
    assert message in clicked.value.format_message()
    assert str(ours.value) == f"candidate {' '.join(words)!r}: {message}"


def test_every_flag_is_an_option_and_a_spec_field():
    opts = {o for p in _cli.params for o in p.opts}
    assert {f.opt for f in FLAGS} == opts
    fields = set(RemedySpec.__struct_fields__)
    assert {f.dest for f in FLAGS} == fields


def test_a_keyword_that_is_no_flag_is_a_type_error_for_the_programmer():
    # GIVEN a misspelt flag name (or one of run's other options)  WHEN made a spec  THEN TypeError
    for kw in ({"stanse": "force_eager"}, {"watch": True}):
        with pytest.raises(TypeError, match=next(iter(kw))):
            spec_from_options(**kw)  # type: ignore[arg-type]
    assert spec_from_options(stance="force_eager") == RemedySpec(stance="force_eager")
