// LaTeX in messages, rendered by the vendored KaTeX (no CDN: the page works offline and its CSP
// allows no other origin). Math is found while marked tokenizes, as a marked extension, so it
// is protected from the markdown rules (`_` and `*` inside math are not emphasis) and code
// spans and code blocks are never looked into: marked consumes them before it reaches here.
//
//   display: $$...$$ and \[...\]   (on lines of their own, or inside a paragraph)
//   inline:  $...$ and \(...\)
//
// A single `$` is math only under the usual rule that keeps prices text ("$5 and $6"): no
// space after the opening `$`, no space before the closing `$`, and the closing `$` not
// followed by a digit. `\$` is a plain dollar sign. Inline math holds no backtick, so a code
// span after a price ("$5 or `$x`") stays code.

// KaTeX (600 kB of script) is imported the first time a message has math: a page without any
// never loads it. Until it has loaded, a formula shows as its source.
let katex = null;
let loading = null;

function loadKatex() {
  loading ??= import("./vendor/katex/katex.mjs").then(
    (module) => {
      katex = module.default;
      renderMath(document); // what was drawn while it loaded
    },
    () => (loading = null), // offline or refused: the sources stay; the next message tries again
  );
}

// Each returns [raw, tex] for math at the start of `src`, or null.
const INLINE_RULES = [
  { display: true, pattern: /^\$\$((?:\\[\s\S]|[^\\$]|\$(?!\$))+?)\$\$/ },
  { display: true, pattern: /^\\\[([\s\S]+?)\\\]/ },
  { display: false, pattern: /^\\\(((?:\\[^)]|[^\\`])+?)\\\)/ },
  { display: false, pattern: /^\$(?=[^\s$])((?:\\[\s\S]|[^\\$`])+?)(?<!\s)\$(?!\d)/ },
];

// Display math as a block of its own: the delimiters open a line and close one.
const BLOCK_RULES = [
  /^ {0,3}\$\$((?:\\[\s\S]|[^\\$]|\$(?!\$))+?)\$\$[ \t]*(?:\n|$)/,
  /^ {0,3}\\\[([\s\S]+?)\\\][ \t]*(?:\n|$)/,
];
const BLOCK_START = /(^|\n) {0,3}(?:\$\$|\\\[)/;
const INLINE_START = /\$|\\[[(]/;

/** The math at the very start of `src` (inline text), as `{raw, tex, display}`, or null. */
export function inlineMathAt(src) {
  for (const { display, pattern } of INLINE_RULES) {
    const match = pattern.exec(src);
    if (match && match[1].trim()) return { raw: match[0], tex: match[1].trim(), display };
  }
  return null;
}

/** The display block at the very start of `src` (block level), or null. */
export function blockMathAt(src) {
  for (const pattern of BLOCK_RULES) {
    const match = pattern.exec(src);
    if (match && match[1].trim()) return { raw: match[0], tex: match[1].trim(), display: true };
  }
  return null;
}

// A formula is a few hundred characters; a longer one is left as its source, not typeset (a
// reply's thousands of `\\` rows drew a box 93,000 px tall). KaTeX caps the rest: sizes the
// source writes (\rule, \kern, \raisebox...) to MAX_SIZE_EM, and macro expansions to
// MAX_EXPAND (a few \defs that each call the next one twice make millions). maxSize does not
// cap negative sizes (\kern{-900em}): the CSS keeps whatever a formula draws inside its own
// box (tether.css, "math").
export const MATH_MAX_CHARS = 2000;
const MAX_SIZE_EM = 10;
const MAX_EXPAND = 200;

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const CODE_RUN = /^`+/;

/**
 * `src` with the emphasis characters inside its math replaced (same length), for marked's
 * emphasis pass, which looks ahead for a closing `*` or `_` and would otherwise find one inside
 * a formula. Code spans are skipped as marked skips them.
 */
export function maskMath(src) {
  let out = "";
  let i = 0;
  while (i < src.length) {
    const ch = src[i];
    if (ch === "`") {
      const run = CODE_RUN.exec(src.slice(i))[0];
      const close = src.indexOf(run, i + run.length);
      const end = close === -1 ? i + run.length : close + run.length;
      out += src.slice(i, end);
      i = end;
      continue;
    }
    const math = ch === "$" || ch === "\\" ? inlineMathAt(src.slice(i)) : null;
    if (math) {
      out += math.raw.replace(/[*_~]/g, "+");
      i += math.raw.length;
    } else if (ch === "\\") {
      out += src.slice(i, i + 2);
      i += 2;
    } else {
      out += ch;
      i += 1;
    }
  }
  return out;
}

/** A math token's classes; one over MATH_MAX_CHARS is marked to stay its source. */
function mathClasses(token) {
  const kind = token.display ? "math-display" : "math-inline";
  return token.tex.length > MATH_MAX_CHARS ? `math ${kind} math-too-long` : `math ${kind}`;
}

/** The marked extension (`new Marked(..., mathExtension)`): math tokens and their HTML. */
export const mathExtension = {
  extensions: [
    {
      name: "mathBlock",
      level: "block",
      start(src) {
        const match = BLOCK_START.exec(src);
        return match ? match.index + match[1].length : undefined;
      },
      tokenizer(src) {
        const math = blockMathAt(src);
        return math ? { type: "mathBlock", ...math } : undefined;
      },
      renderer: (token) => `<div class="${mathClasses(token)}">${escapeHtml(token.tex)}</div>\n`,
    },
    {
      name: "math",
      level: "inline",
      start(src) {
        const index = src.search(INLINE_START);
        return index === -1 ? undefined : index;
      },
      tokenizer(src) {
        const math = inlineMathAt(src);
        return math ? { type: "math", ...math } : undefined;
      },
      renderer: (token) => `<span class="${mathClasses(token)}">${escapeHtml(token.tex)}</span>`,
    },
  ],
  hooks: { emStrongMask: maskMath },
};

export const KATEX_OPTIONS = {
  throwOnError: false,
  trust: false,
  output: "htmlAndMathml",
  strict: "ignore",
  maxSize: MAX_SIZE_EM,
  maxExpand: MAX_EXPAND,
};

// Rendered formulas by source, cloned on reuse: a streaming reply is re-rendered on each
// update, and its finished formulas then cost a clone, not a KaTeX run.
const cache = new Map();
const CACHE_SIZE = 300;

function rendered(tex, display) {
  const key = `${display ? "D" : "I"}${tex}`;
  let node = cache.get(key);
  if (!node) {
    const holder = document.createElement("span");
    // KaTeX builds DOM nodes (no HTML string) and, with trust off, no links, classes or ids
    // from the source; a formula it cannot parse is shown as its source, marked as an error.
    katex.render(tex, holder, { ...KATEX_OPTIONS, displayMode: display });
    node = holder.firstChild;
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value);
    cache.set(key, node);
  }
  return node.cloneNode(true);
}

/** Typesets every `.math` element under `root` (made by mathExtension's renderer) in place. */
export function renderMath(root) {
  const nodes = root.querySelectorAll(".math:not([data-typeset]):not(.math-too-long)");
  if (nodes.length === 0) return;
  if (!katex) {
    loadKatex();
    return;
  }
  for (const node of nodes) {
    node.dataset.typeset = "";
    try {
      node.replaceChildren(rendered(node.textContent, node.classList.contains("math-display")));
    } catch {
      // Left as its source text: a formula KaTeX fails on is still readable.
    }
  }
}
