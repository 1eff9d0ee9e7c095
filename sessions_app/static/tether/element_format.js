// How elements.js words an element: its size, and a text as a fenced code block. No DOM here
// (tests/js/elements.test.mjs runs it under node).

import { gettext, interpolate } from "./i18n.js";

/** A size for people: "12.3 MB", "120 KB", "800 bytes". */
export function humanSize(bytes) {
  const n = Number(bytes) || 0;
  if (n >= 1_000_000) return interpolate(gettext("%(size)s MB"), { size: (n / 1_000_000).toFixed(1) });
  if (n >= 1_000) return interpolate(gettext("%(size)s KB"), { size: Math.floor(n / 1_000) });
  return interpolate(gettext("%(size)s bytes"), { size: n });
}

/** A text as the markdown of one fenced code block, whatever it contains: the fence is longer
 * than any run of backticks in it, and a language that is not a plain name is left out. */
export function fencedCode(text, language) {
  const longest = Math.max(0, ...(String(text).match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  const lang = /^[\w+-]{1,40}$/.test(language ?? "") ? language : "";
  return `${fence}${lang}\n${text}\n${fence}`;
}

/** What the page shows of an app's custom element (Chainlit's CustomElement), whose component
 * it cannot run: a caption naming it, and its props as JSON. */
export function customElementFallback(element) {
  return {
    caption: interpolate(gettext("%(name)s: a custom element of the app, shown as its data"), {
      name: element.name ?? "custom",
    }),
    json: JSON.stringify(element.props ?? {}, null, 2),
  };
}
