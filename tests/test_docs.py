"""The README and docs/ hold together: every relative link resolves (file and heading), every CLI
subcommand is in the README's commands table, the README stays a page for users, and test marks
sit on tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans (a link inside them is not a link)."""
    return _CODE.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    return [m.group(1) for m in _LINK.finditer(_prose(text))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out: set[str] = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n, s = 0, base
            while s in out:
                n += 1
                s = f"{base}-{n}"
            out.add(s)
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{target}: no heading #{frag} in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_checker_finds_a_missing_page_and_a_missing_heading(tmp_path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A section: with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md) [ok](other.md#a-section-with-code) [web](https://x.org/y)\n"
                    "[gone](missing.md) [bad](other.md#nowhere) `[code](ignored.md)`\n"
                    "```\n[fenced](ignored.md)\n```\n")
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "other.md#nowhere"]


def _readme_commands() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Commands", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `seamscope ")]
    return {ln.split("`seamscope ", 1)[1].split()[0].rstrip("`") for ln in rows}


def test_every_cli_subcommand_is_in_the_readme_commands_table() -> None:
    from seamscope.cli import COMMANDS

    table = _readme_commands()
    assert set(COMMANDS) - table == set(), "add a row to the README's commands table"
    assert table - set(COMMANDS) == set(), "the README's commands table names a command that does not exist"


def test_the_readme_is_a_page_for_users() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to a page under docs/"
    fence = lines[lines.index("```") + 1: lines.index("```", lines.index("```") + 1)]
    assert [ln.split()[:2] for ln in fence] == [["make", "demo"], ["make", "test"]]
    assert "pip install" in text
    for code in ("0", "1", "2", "130", "143", "129"):
        assert f"| {code} |" in text, f"exit code {code} missing from the README"


def test_pages_other_than_the_changelog_carry_no_history() -> None:
    for page in PAGES:
        if page.name == "CHANGELOG.md":
            continue
        text = page.read_text(encoding="utf-8")
        for pattern in (r"\bcommit `?[0-9a-f]{7,40}\b", r"\(was `", r"\bwhat changed most recently\b"):
            assert not re.search(pattern, text, re.I), f"{page.relative_to(ROOT)}: {pattern} belongs in CHANGELOG.md"


def _marked_helpers(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("test"):
            for d in node.decorator_list:
                text = ast.unparse(d)
                if text.startswith("pytest.mark."):
                    out.append(f"{path.name}:{node.lineno} {node.name} has @{text}")
    return out


def test_marks_sit_on_tests_not_on_helpers() -> None:
    files = sorted((ROOT / "tests").glob("*.py")) + sorted((ROOT / "benchmarks").glob("test_*.py"))
    assert [m for f in files for m in _marked_helpers(f)] == []
