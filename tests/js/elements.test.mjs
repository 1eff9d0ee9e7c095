// Elements (element_format.js): the sizes a download link shows, and a text turned into one fenced
// code block whatever backticks it holds.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { customElementFallback, fencedCode, humanSize } from "../../sessions_app/static/tether/element_format.js";

describe("humanSize", () => {
  it("says bytes, KB or MB", () => {
    assert.equal(humanSize(8), "8 bytes");
    assert.equal(humanSize(120_400), "120 KB");
    assert.equal(humanSize(12_345_678), "12.3 MB");
    assert.equal(humanSize(undefined), "0 bytes");
  });
});

describe("fencedCode", () => {
  it("fences a text with its language", () => {
    assert.equal(fencedCode("print(1)", "python"), "```python\nprint(1)\n```");
  });

  it("uses a fence longer than any backtick run inside, so the text cannot close it", () => {
    assert.equal(fencedCode("a ```` b", "js"), "`````js\na ```` b\n`````");
  });

  it("drops a language that is not a plain name", () => {
    assert.equal(fencedCode("x", 'py"><img src=x>'), "```\nx\n```");
    assert.equal(fencedCode("x", null), "```\nx\n```");
  });
});

describe("customElementFallback", () => {
  it("names the element and shows its props as JSON", () => {
    const shown = customElementFallback({ name: "Counter", props: { count: 3 } });
    assert.equal(shown.caption, "Counter: a custom element of the app, shown as its data");
    assert.equal(shown.json, '{\n  "count": 3\n}');
  });

  it("shows empty props when there are none", () => {
    assert.equal(customElementFallback({ name: "Empty" }).json, "{}");
  });
});
