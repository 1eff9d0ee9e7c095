// The theme: theme.js (a classic script, run here against a stand-in window) picks, keeps and
// follows the theme; tether.css's colours for both themes meet WCAG AA contrast for text.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import vm from "node:vm";

const STATIC = new URL("../../sessions_app/static/tether/", import.meta.url);
const SCRIPT = readFileSync(new URL("theme.js", STATIC), "utf8");
const CSS = readFileSync(new URL("tether.css", STATIC), "utf8");

/** Run theme.js in a fresh stand-in window; `stored` is what localStorage holds. */
function load({ stored = null, systemDark = false, storageFails = false } = {}) {
  const attributes = {};
  const mediaListeners = [];
  const windowListeners = {};
  const items = new Map(stored == null ? [] : [["tether.theme", stored]]);
  const select = { value: "", listeners: [], addEventListener: (_, f) => select.listeners.push(f) };
  const query = {
    matches: systemDark,
    addEventListener: (_, f) => mediaListeners.push(f),
  };
  const refuse = () => {
    throw new Error("SecurityError");
  };
  const window = {
    document: {
      readyState: "complete",
      documentElement: { setAttribute: (name, value) => (attributes[name] = value) },
      querySelectorAll: () => [select],
      addEventListener: () => {},
    },
    localStorage: storageFails
      ? { getItem: refuse, setItem: refuse, removeItem: refuse }
      : {
          getItem: (key) => items.get(key) ?? null,
          setItem: (key, value) => items.set(key, String(value)),
          removeItem: (key) => items.delete(key),
        },
    matchMedia: () => query,
    addEventListener: (name, f) => (windowListeners[name] = f),
  };
  vm.runInNewContext(SCRIPT, { window });
  const setSystem = (dark) => {
    query.matches = dark;
    for (const f of mediaListeners) f({ matches: dark });
  };
  return { window, attributes, items, select, setSystem, windowListeners };
}

describe("theme.js", () => {
  it("resolves a choice against the system's preference", () => {
    const { resolve, normalize } = load().window.tetherTheme;
    assert.equal(resolve("system", true), "dark");
    assert.equal(resolve("system", false), "light");
    assert.equal(resolve("light", true), "light");
    assert.equal(resolve("dark", false), "dark");
    assert.equal(normalize("purple"), "system");
    assert.equal(normalize(null), "system");
  });

  it("applies the stored choice at once, before anything else runs", () => {
    const { attributes, select } = load({ stored: "dark", systemDark: false });
    assert.deepEqual(attributes, { "data-theme": "dark", "data-theme-choice": "dark" });
    assert.equal(select.value, "dark");
  });

  it("with no choice (or a bad one) follows the system, also when it changes", () => {
    for (const stored of [null, "neon"]) {
      const { attributes, setSystem } = load({ stored, systemDark: true });
      assert.equal(attributes["data-theme"], "dark");
      assert.equal(attributes["data-theme-choice"], "system");
      setSystem(false);
      assert.equal(attributes["data-theme"], "light");
    }
  });

  it("keeps a choice made in the control; 'system' forgets it", () => {
    const { attributes, items, select, setSystem } = load({ systemDark: true });
    select.listeners[0]({ target: { value: "light" } });
    assert.equal(items.get("tether.theme"), "light");
    assert.equal(attributes["data-theme"], "light");
    setSystem(true); // an explicit choice does not follow the system
    assert.equal(attributes["data-theme"], "light");
    select.listeners[0]({ target: { value: "system" } });
    assert.equal(items.has("tether.theme"), false);
    assert.equal(attributes["data-theme"], "dark");
  });

  it("follows a choice made in another tab", () => {
    const { attributes, items, windowListeners } = load({ stored: "light" });
    items.set("tether.theme", "dark");
    windowListeners.storage({ key: "tether.theme" });
    assert.equal(attributes["data-theme"], "dark");
  });

  it("works, unkept, where storage is refused", () => {
    const { window, attributes } = load({ storageFails: true, systemDark: true });
    assert.equal(attributes["data-theme"], "dark");
    window.tetherTheme.choose("light");
    assert.equal(attributes["data-theme"], "light");
  });
});

// --- contrast ---------------------------------------------------------------------------------

function customProperties(selector) {
  const start = CSS.indexOf(`${selector} {`);
  assert.ok(start >= 0, `no ${selector} block in tether.css`);
  const block = CSS.slice(start, CSS.indexOf("}", start));
  return Object.fromEntries([...block.matchAll(/--([\w-]+):\s*(#[0-9a-f]{6})/gi)].map((m) => [m[1], m[2]]));
}

function luminance(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

// Each text colour and the backgrounds it is drawn on.
const PAIRS = {
  text: ["bg", "panel", "code-bg", "user-bubble", "accent-soft", "warn-soft", "danger-soft"],
  muted: ["bg", "panel", "code-bg"],
  accent: ["bg", "panel", "accent-soft"],
  "accent-text": ["accent"],
  danger: ["panel", "danger-soft"],
  "hl-keyword": ["code-bg"],
  "hl-string": ["code-bg"],
  "hl-comment": ["code-bg"],
  "hl-number": ["code-bg"],
  "hl-title": ["code-bg"],
  "hl-built-in": ["code-bg"],
  "hl-meta": ["code-bg"],
};

describe("tether.css", () => {
  it("measures contrast the WCAG way", () => {
    assert.equal(contrast("#000000", "#ffffff"), 21);
    assert.ok(Math.abs(contrast("#767676", "#ffffff") - 4.54) < 0.01);
  });

  for (const [theme, selector] of [
    ["light", ":root"],
    ["dark", ':root[data-theme="dark"]'],
  ]) {
    it(`gives every text colour of the ${theme} theme AA contrast (4.5:1)`, () => {
      const colours = customProperties(selector);
      const low = [];
      for (const [fg, backgrounds] of Object.entries(PAIRS)) {
        for (const bg of backgrounds) {
          assert.ok(colours[fg] && colours[bg], `${theme}: --${fg} or --${bg} is not a #rrggbb colour`);
          const ratio = contrast(colours[fg], colours[bg]);
          if (ratio < 4.5) low.push(`--${fg} on --${bg}: ${ratio.toFixed(2)}`);
        }
      }
      assert.deepEqual(low, []);
    });
  }
});
