"""The README and the docs: every link resolves, every page is linked from the README, the
README stays a short page for users, and no page names a past work session.

Links are read the way GitHub renders them: a relative path from the page that holds the
link, and an anchor that is the slug of one of the target page's headings. Code blocks and
code spans are skipped (a link written inside one is not a link).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_BYTES = 16_000  # the "at most about 15 KB"

LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# Diary words: "session 9", "wave 2", "since the last session" (a work session, not a chat session).
PAST_WORK = re.compile(r"\b(?:work )?session \d+\b|\bwave \d+\b|\bsince the last session\b", re.I)
DOC_PATH = re.compile(r"\bdocs/[\w-]+\.md\b")


def _pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """The page without its code blocks and code spans."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def _broken(page: Path) -> list[str]:
    problems = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            problems.append(f"{target}: no such file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            problems.append(f"{target}: {resolved.name} has no heading #{anchor}")
    return problems


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.name)
def test_every_link_of_a_page_resolves(page):
    problems = _broken(page)
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_every_doc_page_is_linked_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _links(README)}
    missing = [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked]
    assert not missing, f"docs not linked from the README: {missing}"


def test_the_readme_is_a_short_page_for_users():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (at most {README_MAX_BYTES})"


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.name)
def test_no_page_names_a_past_work_session(page):
    found = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if PAST_WORK.search(line)
    ]
    assert not found, f"{page.relative_to(ROOT)} names past work sessions:\n" + "\n".join(found)


def test_docs_paths_named_in_the_code_exist():
    """A docstring, comment or config file that names ``docs/<page>.md`` names a page that is there."""
    sources = [
        path
        for pattern in ("*.py", "*.conf", "*.js", "*.html", "Makefile", "run")
        for path in ROOT.rglob(pattern)
        if not {".venv", ".git", "node_modules", "vendor", "var"} & set(path.relative_to(ROOT).parts)
    ]
    missing = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources
        for name in set(DOC_PATH.findall(path.read_text(errors="replace")))
        if not (ROOT / name).exists()
    )
    assert not missing, "docs pages named but absent:\n" + "\n".join(missing)


def test_the_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "target.md").write_text("# Target page\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[fine](target.md#a-section) [gone](missing.md) [bad anchor](target.md#nowhere)\n"
        "`[in code](missing.md)`\n"
    )
    problems = _broken(page)
    assert len(problems) == 2, problems
    assert "missing.md" in problems[0] and "#nowhere" in problems[1]
