// Copy buttons: on each code block (its code) and each finished reply (its markdown, as the
// assistant wrote it). The button says "Copied" for a moment, and the page's status region
// (#copy-status, aria-live) says it to screen readers.

import { gettext } from "./i18n.js";

const RESET_MS = 2000;

/**
 * Put `text` on the clipboard: navigator.clipboard where the page may use it, else the old
 * way (a selected, off-screen textarea and execCommand("copy")). Resolves to whether it worked.
 * `env` is the global object (a stand-in in the unit tests).
 */
export async function copyText(text, env = globalThis) {
  const clipboard = env.navigator?.clipboard;
  if (clipboard?.writeText) {
    try {
      await clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, not focused): try the old way.
    }
  }
  return legacyCopy(text, env.document);
}

function legacyCopy(text, document) {
  if (typeof document?.execCommand !== "function" || !document.body) return false;
  const focused = document.activeElement;
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.setAttribute("aria-hidden", "true");
  area.className = "visually-hidden";
  document.body.append(area);
  area.select();
  let copied = false;
  try {
    copied = Boolean(document.execCommand("copy"));
  } catch {
    copied = false;
  }
  area.remove();
  focused?.focus?.();
  return copied;
}

function announce(text) {
  const status = document.getElementById("copy-status");
  if (!status) return;
  status.textContent = ""; // the same words twice are announced twice
  setTimeout(() => (status.textContent = text), 50);
}

/** A "Copy" button that copies what `text()` gives when pressed. */
export function copyButton({ className, label, text }) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = className;
  button.textContent = gettext("Copy");
  button.setAttribute("aria-label", label);
  let timer = null;
  button.addEventListener("click", async () => {
    const copied = await copyText(text());
    button.textContent = copied ? gettext("Copied") : gettext("Copy failed");
    button.toggleAttribute("data-copied", copied);
    announce(copied ? gettext("Copied to the clipboard") : gettext("Could not copy: select the text and copy it by hand"));
    clearTimeout(timer);
    timer = setTimeout(() => {
      button.textContent = gettext("Copy");
      button.removeAttribute("data-copied");
    }, RESET_MS);
  });
  return button;
}
