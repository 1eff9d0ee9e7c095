// Math in messages (math.js): which `$`, `$$`, `\(...\)` and `\[...\]` are math, that math is
// protected from markdown's emphasis, that code is never looked into, and that prices stay text.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  KATEX_OPTIONS,
  MATH_MAX_CHARS,
  blockMathAt,
  inlineMathAt,
  mathExtension,
  maskMath,
} from "../../sessions_app/static/tether/math.js";
import katex from "../../sessions_app/static/tether/vendor/katex/katex.mjs";
import { Marked } from "../../sessions_app/static/tether/vendor/marked.esm.js";

const markdown = new Marked({ gfm: true, breaks: true }, mathExtension);
const html = (text) => markdown.parse(text);
const inline = (tex) => `<span class="math math-inline">${tex}</span>`;
const display = (tex) => `<span class="math math-display">${tex}</span>`;

describe("inlineMathAt", () => {
  it("finds $...$, \\(...\\), $$...$$ and \\[...\\] with their source", () => {
    assert.deepEqual(inlineMathAt("$e^{i\\pi}+1=0$ is"), { raw: "$e^{i\\pi}+1=0$", tex: "e^{i\\pi}+1=0", display: false });
    assert.deepEqual(inlineMathAt("\\(a+b\\) x"), { raw: "\\(a+b\\)", tex: "a+b", display: false });
    assert.deepEqual(inlineMathAt("$$x^2$$ y"), { raw: "$$x^2$$", tex: "x^2", display: true });
    assert.deepEqual(inlineMathAt("\\[x^2\\] y"), { raw: "\\[x^2\\]", tex: "x^2", display: true });
  });

  it("keeps prices text: a space after the opening or before the closing $, or a digit after it", () => {
    for (const text of ["$5 and $6", "$ x$", "$x $", "$5,$10", "$10 to $20 a month", "$", "$$", "$$$$", "$ $"]) {
      assert.equal(inlineMathAt(text), null, text);
    }
  });

  it("takes an escaped dollar inside math as part of it", () => {
    assert.equal(inlineMathAt("$a\\$b$").tex, "a\\$b");
  });

  it("does not close what is not closed (a reply still streaming)", () => {
    assert.equal(inlineMathAt("$$\\int_0^1 x"), null);
    assert.equal(inlineMathAt("\\(a+b"), null);
    assert.equal(inlineMathAt("$a+b"), null);
  });
});

describe("blockMathAt", () => {
  it("takes $$ and \\[ blocks over several lines", () => {
    assert.equal(blockMathAt("$$\n\\int_0^1 x^2\\,dx\n$$\nafter").tex, "\\int_0^1 x^2\\,dx");
    assert.equal(blockMathAt("\\[\na\n\\]").tex, "a");
    assert.equal(blockMathAt("$$x$$ and more"), null, "not alone on its line: inline");
  });
});

describe("markdown with math", () => {
  it("renders display and inline math as placeholders with the source as text", () => {
    assert.equal(html("$$\\int_0^1 x^2\\,dx$$"), '<div class="math math-display">\\int_0^1 x^2\\,dx</div>\n');
    assert.equal(html("So $e^{i\\pi}+1=0$."), `<p>So ${inline("e^{i\\pi}+1=0")}.</p>\n`);
    assert.equal(html("Here \\(x\\) and \\[y\\]"), `<p>Here ${inline("x")} and ${display("y")}</p>\n`);
  });

  it("does not turn _ and * inside math into emphasis", () => {
    assert.equal(html("$a_1 + b_1$ and $c_2$"), `<p>${inline("a_1 + b_1")} and ${inline("c_2")}</p>\n`);
    assert.equal(html("$a*b$ times $c*d$"), `<p>${inline("a*b")} times ${inline("c*d")}</p>\n`);
    assert.equal(html("*x $a*b$ y*"), `<p><em>x ${inline("a*b")} y</em></p>\n`);
    assert.equal(html("$$\na_1 * b_2 * c_3\n$$"), '<div class="math math-display">a_1 * b_2 * c_3</div>\n');
  });

  it("never looks into inline code or code blocks", () => {
    assert.equal(html("`$x$` and `\\(y\\)`"), "<p><code>$x$</code> and <code>\\(y\\)</code></p>\n");
    const fenced = html("```\n$$x$$ $y$\n```");
    assert.doesNotMatch(fenced, /math/);
    assert.match(fenced, /\$\$x\$\$ \$y\$/);
    assert.doesNotMatch(html("    $x$ indented code"), /math/);
    // A price before a code span: the `$` of the price does not reach into the code.
    assert.equal(html("It costs $6; `$x$` is code."), "<p>It costs $6; <code>$x$</code> is code.</p>\n");
    assert.equal(html("\\(a `b` \\) c"), "<p>(a <code>b</code> ) c</p>\n");
  });

  it("leaves prices and escaped dollars as text", () => {
    assert.equal(html("It costs $5 and $6."), "<p>It costs $5 and $6.</p>\n");
    assert.equal(html("From $10 to $20, \\$x\\$."), "<p>From $10 to $20, $x$.</p>\n");
  });

  it("escapes the source it keeps", () => {
    assert.equal(html("$a<b$"), `<p>${inline("a&lt;b")}</p>\n`);
  });

  it("shows unclosed math as text while the reply streams", () => {
    assert.equal(html("Soon $$\\int_0"), "<p>Soon $$\\int_0</p>\n");
  });
});

describe("maskMath", () => {
  it("hides emphasis characters inside math only, keeping the length", () => {
    const src = "*a $b*c_d$ e* `$f*$`";
    const masked = maskMath(src);
    assert.equal(masked.length, src.length);
    assert.equal(masked, "*a $b+c+d$ e* `$f*$`");
  });
});

describe("caps on a formula", () => {
  it("marks a formula over MATH_MAX_CHARS to stay its source", () => {
    const long = "x+".repeat(MATH_MAX_CHARS / 2) + "x";
    assert.equal(html(`$${long}$`), `<p><span class="math math-inline math-too-long">${long}</span></p>\n`);
    assert.equal(html(`$$${long}$$`), `<div class="math math-display math-too-long">${long}</div>\n`);
    assert.equal(html(`$${"x".repeat(MATH_MAX_CHARS)}$`), `<p>${inline("x".repeat(MATH_MAX_CHARS))}</p>\n`);
  });

  it("caps the sizes a formula writes with KaTeX's maxSize", () => {
    const drawn = katex.renderToString("\\rule{500em}{500em}", KATEX_OPTIONS).split("katex-html")[1];
    assert.match(drawn, /border-right-width:10em;border-top-width:10em/);
    assert.doesNotMatch(drawn, /500em/); // (the source is only in the MathML annotation)
  });

  it("stops a macro that doubles itself with KaTeX's maxExpand, showing the source", () => {
    const defs = "abcdefghij".split("").map((name, i, all) => `\\def\\${name}{\\${all[i + 1] ?? "x"}\\${all[i + 1] ?? "x"}}`);
    const started = Date.now();
    const drawn = katex.renderToString(`${defs.join("")}\\a`, KATEX_OPTIONS);
    assert.match(drawn, /katex-error/);
    assert.match(drawn, /Too many expansions/);
    assert.ok(Date.now() - started < 1000);
  });
});
