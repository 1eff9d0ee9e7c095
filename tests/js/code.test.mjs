// Code blocks: highlightedHtml (highlight.js, vendored) and copyText (the clipboard, or the old
// execCommand way when the clipboard API is missing or refuses).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { highlightedHtml, knownLanguage } from "../../sessions_app/static/tether/code.js";
import { copyText } from "../../sessions_app/static/tether/copy.js";

const UNESCAPE = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#x27;": "'", "&#39;": "'" };
const textOf = (html) => html.replace(/<[^>]*>/g, "").replace(/&(amp|lt|gt|quot|#x27|#39);/g, (e) => UNESCAPE[e]);

describe("highlightedHtml", () => {
  const code = 'def greet(name):\n    return f"<b>{name}</b>"  # & more\n';

  it("marks up python's tokens with highlight.js classes", () => {
    const html = highlightedHtml(code, "python");
    assert.match(html, /<span class="hljs-keyword">def<\/span>/);
    assert.match(html, /<span class="hljs-title function_">greet<\/span>/);
    assert.match(html, /<span class="hljs-comment"># &amp; more<\/span>/);
  });

  it("escapes the code and keeps every character of it", () => {
    const html = highlightedHtml(code, "py");
    assert.doesNotMatch(html, /<b>/);
    assert.equal(textOf(html), code);
  });

  it("knows the vendored grammars and their aliases, and guesses no other", () => {
    for (const name of ["python", "py", "js", "typescript", "ts", "bash", "sh", "json", "html", "css", "sql", "yaml", "diff"]) {
      assert.ok(knownLanguage(name), name);
    }
    assert.equal(highlightedHtml("IDENTIFICATION DIVISION.", "cobol"), null);
    assert.equal(highlightedHtml("x = 1", undefined), null);
  });
});

describe("copyText", () => {
  function fakeDocument({ execResult = true } = {}) {
    const doc = {
      copied: null,
      appended: [],
      activeElement: null,
      body: { append: (node) => doc.appended.push(node) },
      createElement: () => {
        const area = {
          value: "",
          setAttribute() {},
          select() {
            doc.selected = area.value;
          },
          remove() {
            area.removed = true;
          },
        };
        return area;
      },
      execCommand(command) {
        if (command === "copy") doc.copied = doc.selected;
        return execResult;
      },
    };
    return doc;
  }

  it("writes to navigator.clipboard when there is one", async () => {
    let written = null;
    const env = { navigator: { clipboard: { writeText: async (t) => (written = t) } }, document: fakeDocument() };
    assert.equal(await copyText("print('hi')\n", env), true);
    assert.equal(written, "print('hi')\n");
    assert.equal(env.document.copied, null);
  });

  it("falls back to a selected textarea when the clipboard refuses, and cleans up", async () => {
    const document = fakeDocument();
    const env = { navigator: { clipboard: { writeText: async () => Promise.reject(new Error("denied")) } }, document };
    assert.equal(await copyText("a\tb", env), true);
    assert.equal(document.copied, "a\tb");
    assert.equal(document.appended.length, 1);
    assert.equal(document.appended[0].removed, true);
  });

  it("falls back when there is no clipboard API, and says when nothing worked", async () => {
    const document = fakeDocument();
    assert.equal(await copyText("x", { navigator: {}, document }), true);
    assert.equal(document.copied, "x");
    assert.equal(await copyText("x", { navigator: {}, document: fakeDocument({ execResult: false }) }), false);
    assert.equal(await copyText("x", { navigator: {}, document: {} }), false);
  });
});
