"""The one enumeration of image blocks, references, and the textual strip (no database)."""

import json
from typing import Any

import pytest

from media_app.blocks import InvalidRef, MediaRef, find_image, image_blocks, make_ref, parse_ref
from media_app.stripping import NOT_DISPLAYED, display_blocks, display_text, strip_text
from tests.media_app.photos import assert_no_payload, failed_block, image_block, photo

THREAD = "0b7f3c1e-0000-4000-8000-000000000001"
STEP = "0b7f3c1e-0000-4000-8000-000000000002"


def mixed_blocks() -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "look"},
        image_block(photo("image/jpeg")),  # 0
        failed_block(),  # 1
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "a screenshot"}, image_block(photo("image/png"))],  # 2
        },
        image_block(photo("image/gif", 100), "image/gif"),  # 3: short enough to stay in the scan
        {"type": "image", "source": {"type": "url", "url": "https://example.invalid/x.png"}},  # 4
    ]


def test_image_blocks_are_counted_in_document_order_one_level_deep():
    blocks = mixed_blocks()
    found = list(image_blocks(blocks))
    assert [(i.index, i.path) for i in found] == [
        (0, (1,)),
        (1, (2,)),
        (2, (3, "content", 1)),
        (3, (4,)),
        (4, (5,)),
    ]
    assert [i.payload is not None for i in found] == [True, False, True, True, False]
    assert find_image(blocks, 2) == found[2]
    assert find_image(blocks, 5) is None
    assert list(image_blocks({"not": "a list"})) == []


def test_display_mints_refs_for_payloads_and_says_not_displayed_otherwise():
    blocks = mixed_blocks()
    original = json.dumps(blocks)
    shown = display_blocks(THREAD, STEP, blocks)
    assert json.dumps(blocks) == original  # the input is left alone
    assert shown == [
        {"type": "text", "text": "look"},
        {"type": "image", "imageRef": f"{THREAD}/{STEP}/0"},
        {"type": "text", "text": NOT_DISPLAYED},
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [
                {"type": "text", "text": "a screenshot"},
                {"type": "image", "imageRef": f"{THREAD}/{STEP}/2"},
            ],
        },
        {"type": "image", "imageRef": f"{THREAD}/{STEP}/3"},
        {"type": "text", "text": NOT_DISPLAYED},
    ]
    assert_no_payload(shown)


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
def test_the_text_scan_replaces_long_payloads_in_either_spacing(separators):
    blocks = mixed_blocks()
    text = json.dumps(blocks, separators=separators)
    stripped = strip_text(text)
    assert len(stripped) < 1000
    assert_no_payload(stripped)
    # From the stripped text, the same blocks as from the whole list.
    assert display_text(THREAD, STEP, text) == display_blocks(THREAD, STEP, blocks)


def test_text_that_mentions_a_payload_is_not_touched():
    quoted = json.dumps({"data": "A" * 2000})
    blocks = [{"type": "text", "text": quoted}]
    assert strip_text(json.dumps(blocks)) == json.dumps(blocks)


@pytest.mark.parametrize("text", [None, "", "{not json", '{"a": 1}', '"just a string"', "[" * 100_000])
def test_an_unreadable_row_is_a_stub(text):
    assert display_text(THREAD, STEP, text) == [{"type": "text", "text": "[message could not be read]"}]


def test_refs_round_trip_and_anything_else_is_invalid():
    ref = make_ref(THREAD, STEP, 7)
    assert parse_ref(ref) == MediaRef(THREAD, STEP, 7)
    assert parse_ref("a_b-c/X/999").index == 999
    bad = [
        "",
        f"{THREAD}/{STEP}",
        f"{THREAD}/{STEP}/1000",
        f"{THREAD}/{STEP}/-1",
        f"{THREAD}/{STEP}/1/2",
        f"{THREAD}/{STEP}/01a",
        f"{THREAD}/../0",
        f"{'a' * 65}/{STEP}/0",
        f"{THREAD}/st ep/0",
        f"{THREAD}/stép/0",
        f"{THREAD}/{STEP}/0\n",
    ]
    for value in bad:
        with pytest.raises(InvalidRef):
            parse_ref(value)
