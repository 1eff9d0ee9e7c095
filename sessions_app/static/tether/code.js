// Code highlighting for fenced code blocks: the vendored highlight.js core and the grammars
// below (their aliases too: py, js, ts, sh, html, yml, ...). A block whose language is not one
// of them, or is not given, is shown plain: no guessing.

import hljs from "./vendor/highlightjs/core.min.js";
import bash from "./vendor/highlightjs/languages/bash.min.js";
import css from "./vendor/highlightjs/languages/css.min.js";
import diff from "./vendor/highlightjs/languages/diff.min.js";
import javascript from "./vendor/highlightjs/languages/javascript.min.js";
import json from "./vendor/highlightjs/languages/json.min.js";
import python from "./vendor/highlightjs/languages/python.min.js";
import sql from "./vendor/highlightjs/languages/sql.min.js";
import typescript from "./vendor/highlightjs/languages/typescript.min.js";
import xml from "./vendor/highlightjs/languages/xml.min.js";
import yaml from "./vendor/highlightjs/languages/yaml.min.js";

const GRAMMARS = { bash, css, diff, javascript, json, python, sql, typescript, xml, yaml };
for (const [name, grammar] of Object.entries(GRAMMARS)) hljs.registerLanguage(name, grammar);

/** Whether `language` (a name or an alias) is highlighted. */
export function knownLanguage(language) {
  return Boolean(language && hljs.getLanguage(language));
}

/**
 * `code` as highlight.js's HTML (the code's text escaped, in `<span class="hljs-...">`), or
 * null when its language is not known. The caller still sanitises it before it is shown.
 */
export function highlightedHtml(code, language) {
  if (!knownLanguage(language)) return null;
  return hljs.highlight(String(code), { language, ignoreIllegals: true }).value;
}
