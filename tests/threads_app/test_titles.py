"""``thread_title``: the sidebar title made from a first message, one case per row."""

import pytest

from threads_app.titles import ELLIPSIS, FALLBACK, TITLE_MAX, thread_title

CASES = [
    # (first message, title)
    ("what's the weather?", "what's the weather?"),
    ("# Plan for *Monday*", "Plan for Monday"),
    ("## Heading\n\nbody text", "Heading body text"),
    ("Setext heading\n===\nmore", "Setext heading more"),
    ("**bold** and __strong__ and *em* and _em too_", "bold and strong and em and em too"),
    ("~~gone~~ kept", "gone kept"),
    ("keep snake_case_names and 2*3*4 as typed", "keep snake_case_names and 2*3*4 as typed"),
    ("see [the docs](https://example.com/docs) now", "see the docs now"),
    ("a [reference link][1] here", "a reference link here"),
    ("mail <https://example.com> me", "mail https://example.com me"),
    ("run `make test` first", "run make test first"),
    ("``code with ` tick``", "code with ` tick"),
    ("![diagram](d.png) explain this", "explain this"),
    ("- one\n- two\n* three\n+ four", "one two three four"),
    ("1. first\n2) second", "first second"),
    ("- [ ] todo\n- [x] done", "todo done"),
    ("> quoted\n> > nested", "quoted nested"),
    ("```python\nprint(1)\n```", "print(1)"),
    ("---\nafter a rule", "after a rule"),
    ("!slow 0.2\nhello there", "hello there"),
    ("!tool\n!fail\n\n!slow 1\nsteps", "steps"),
    ("!crash", "!crash"),  # only a directive: the raw text, not nothing
    ("hello\n!slow 0.2", "hello !slow 0.2"),  # only leading lines are directives
    ("!slowly does it", "!slowly does it"),  # not a directive
    ("  lots   of\n\n\twhitespace  ", "lots of whitespace"),
    ("***", "***"),  # only syntax: the raw text
    ("", FALLBACK),
    ("   \n\t", FALLBACK),
    ("![](x.png)", "![](x.png)"),
]


@pytest.mark.parametrize(("text", "title"), CASES)
def test_thread_title(text: str, title: str) -> None:
    assert thread_title(text) == title


LONG = [
    # (first message, limit, title)
    ("one two three four five", 13, "one two…"),
    ("one two three four five", 14, "one two three…"),
    ("one two three", 13, "one two three"),  # exactly the limit: kept whole
    ("abcdefghijklmnop", 8, "abcdefg…"),  # one long word: cut inside it
    ("first, second third", 15, "first, second…"),
    ("first, second third", 10, "first…"),  # no trailing punctuation before the ellipsis
]


@pytest.mark.parametrize(("text", "limit", "title"), LONG)
def test_long_titles_are_cut_at_a_word_boundary(text: str, limit: int, title: str) -> None:
    assert thread_title(text, limit=limit) == title


def test_the_default_limit_holds_for_a_long_message() -> None:
    title = thread_title("word " * 100)
    assert len(title) <= TITLE_MAX and title.endswith(ELLIPSIS)
    assert title == ("word " * 100)[: len(title) - 1].rstrip() + ELLIPSIS
