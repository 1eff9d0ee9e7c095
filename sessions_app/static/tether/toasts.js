// Errors and notices as toasts just above the composer, where the user acted.
//
// Each toast is an alert (read out once), stays until its time is up (longer while the
// pointer or the focus is in it) or its close button dismisses it; the same text shown again
// restarts its time instead of stacking a copy.

import { gettext } from "./i18n.js";

const SHOWN_MS = 10000;
const MAX_TOASTS = 3;

export class Toasts {
  /** `region`: the element the toasts go in; `makeIcon(name)`: an icon node (render.js). */
  constructor(region, makeIcon) {
    this.region = region;
    this.makeIcon = makeIcon;
    this.shown = new Map(); // text -> {node, timer}
  }

  show(text) {
    const known = this.shown.get(text);
    if (known) {
      this.arm(text, known);
      return;
    }
    const node = document.createElement("div");
    node.className = "toast";
    node.setAttribute("role", "alert");
    const body = document.createElement("span");
    body.className = "toast-text";
    body.textContent = text;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "icon-button toast-close";
    close.setAttribute("aria-label", gettext("Dismiss"));
    close.append(this.makeIcon("close"));
    close.addEventListener("click", () => this.dismiss(text, { refocus: true }));
    node.append(body, close);
    const entry = { node, timer: 0 };
    node.addEventListener("pointerenter", () => clearTimeout(entry.timer));
    node.addEventListener("pointerleave", () => this.arm(text, entry));
    node.addEventListener("focusout", () => this.arm(text, entry));
    node.addEventListener("focusin", () => clearTimeout(entry.timer));
    this.shown.set(text, entry);
    this.region.append(node);
    while (this.shown.size > MAX_TOASTS) this.dismiss(this.shown.keys().next().value);
    this.arm(text, entry);
  }

  arm(text, entry) {
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => this.dismiss(text), SHOWN_MS);
  }

  /** Take a toast away; `refocus`: its close button had the focus, the composer gets it. */
  dismiss(text, { refocus = false } = {}) {
    const entry = this.shown.get(text);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.node.remove();
    this.shown.delete(text);
    if (refocus) document.querySelector("#message-input")?.focus();
  }
}
