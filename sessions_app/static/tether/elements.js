// Elements: files an app (or the user) attached to a message or step, Chainlit's ElementDicts
// (`element` / `remove_element` events, and `elements` of resume_thread, bootstrap and history
// reads). Each is kept by id and drawn under the step it is attached to (`forId`):
//   - "inline": an image (lazy <img>), a file (a download link with its name and size), a PDF
//     (a frame), a text (a code block), a plot (plotly.js, loaded the first time one is shown);
//   - "side" (and "page"): a link under the message that opens the element in a side panel
//     (an <aside> named by its title, with a close button; Esc closes it and gives the focus
//     back to the link).
// The bytes come from the element's `url` (the owner-checked /api/elements/<id>).

import { customElementFallback, fencedCode, humanSize } from "./element_format.js";
import { gettext, interpolate } from "./i18n.js";
import { drawPlot } from "./plots.js";
import { el, icon, markdownFragment } from "./render.js";

const PLOTLY_SRC = new URL("./vendor/plotly-basic.min.js", import.meta.url).href;

// This module's stylesheet, from this origin (the page's CSP allows 'self' styles).
if (typeof document !== "undefined" && !document.querySelector("link[data-elements-css]")) {
  const sheet = document.createElement("link");
  sheet.rel = "stylesheet";
  sheet.href = new URL("./elements.css", import.meta.url).href;
  sheet.dataset.elementsCss = "";
  document.head.append(sheet);
}
let plotlyLoading = null;

const PLOTLY_CSS = new URL("./vendor/plotly.css", import.meta.url).href;

/** plotly.js, injected as a script from this origin the first time a plot is shown. Its
 * stylesheet comes as a file too: plotly.js would insert it as an inline <style>, which the
 * page's CSP refuses; a stylesheet with its id and the class `no-inline-styles` tells it not to. */
function loadPlotly() {
  if (globalThis.Plotly) return Promise.resolve(globalThis.Plotly);
  if (!document.getElementById("plotly.js-style-global")) {
    const sheet = document.createElement("link");
    sheet.id = "plotly.js-style-global";
    sheet.className = "no-inline-styles";
    sheet.rel = "stylesheet";
    sheet.href = PLOTLY_CSS;
    document.head.append(sheet);
  }
  plotlyLoading ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = PLOTLY_SRC;
    script.async = true;
    script.addEventListener("load", () => resolve(globalThis.Plotly));
    script.addEventListener("error", () => {
      plotlyLoading = null;
      reject(new Error(gettext("The plotting library could not be loaded.")));
    });
    document.head.append(script);
  });
  return plotlyLoading;
}

async function fetchText(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return response.text();
}

/** A text as a code block (highlighted, with a Copy button). */
function codeBlock(text, language) {
  return markdownFragment(fencedCode(text, language));
}

function downloadLink(element) {
  const link = el("a", "element-download");
  link.href = element.url;
  link.setAttribute("download", element.name ?? "");
  link.append(icon("download"), el("span", "element-download-name", element.name));
  if (element.bytes) link.append(el("span", "element-download-size", humanSize(element.bytes)));
  return link;
}

function failed(node, element, error) {
  node.replaceChildren(
    el(
      "span",
      "element-error",
      interpolate(gettext("%(name)s could not be shown (%(error)s)."), { name: element.name, error: error.message }),
    ),
    downloadLink(element),
  );
}

/** The element's content as a node; texts and plots fill in when their data arrives. */
export function elementContent(element, { inPanel = false } = {}) {
  const box = el("div", `element element-${element.type}`);
  box.dataset.elementId = element.id;
  box.dataset.display = element.display ?? "inline";
  if (element.type === "image") {
    const img = el("img", `element-image size-${inPanel ? "large" : (element.size ?? "medium")}`);
    img.loading = "lazy";
    img.decoding = "async";
    img.alt = element.name ?? gettext("Image");
    img.src = element.url;
    box.append(img);
  } else if (element.type === "pdf") {
    const frame = el("iframe", "element-pdf");
    frame.title = element.name ?? "PDF";
    frame.src = element.page ? `${element.url}#page=${encodeURIComponent(element.page)}` : element.url;
    const open = el("a", "element-open", gettext("Open the PDF"));
    open.href = element.url;
    open.target = "_blank";
    open.rel = "noopener";
    box.append(frame, open);
  } else if (element.type === "text") {
    box.append(el("div", "element-loading", gettext("Loading…")));
    fetchText(element.url)
      .then((text) => {
        const block = codeBlock(text, element.language);
        // In the panel its title already names it.
        box.replaceChildren(...(inPanel ? [block] : [el("div", "element-caption", element.name), block]));
      })
      .catch((error) => failed(box, element, error));
  } else if (element.type === "custom") {
    const { caption, json } = customElementFallback(element);
    box.append(el("div", "element-caption", caption), codeBlock(json, "json"));
  } else if (element.type === "plotly") {
    const plot = el("div", "element-plot");
    plot.setAttribute("role", "figure"); // not "img": its toolbar buttons are focusable
    plot.setAttribute("aria-label", element.name ?? gettext("Plot"));
    box.append(plot);
    Promise.all([loadPlotly(), fetchText(element.url)])
      .then(([Plotly, text]) => {
        return drawPlot(Plotly, plot, JSON.parse(text));
      })
      .then(() => box.setAttribute("data-rendered", "true"))
      .catch((error) => failed(box, element, error));
  } else {
    box.append(downloadLink(element));
  }
  return box;
}

export class ElementViews {
  /** `nodeFor(stepId)`: the step's element on screen, if any. */
  constructor({ nodeFor }) {
    this.nodeFor = nodeFor;
    this.byId = new Map(); // element id -> ElementDict
    this.boxes = new Map(); // step id -> the <div> of its elements (kept across redraws)
    this.panel = this.buildPanel();
    this.opener = null;
    document.addEventListener(
      "keydown",
      (event) => {
        // (An Escape in a menu or a dialog closes that, not the panel.)
        if (event.key === "Escape" && !this.panel.hidden && !event.target.closest?.(".menu, dialog")) {
          event.preventDefault(); // the chat's own Escape (stop a reply) waits
          this.closePanel();
        }
      },
      true,
    );
  }

  buildPanel() {
    const panel = el("aside", "element-panel");
    panel.id = "element-panel";
    panel.hidden = true;
    // A complementary landmark named by its title (not a modal: the chat stays usable).
    panel.setAttribute("aria-labelledby", "element-panel-title");
    const head = el("div", "element-panel-head");
    const title = el("h2", "element-panel-title");
    title.id = "element-panel-title";
    const close = el("button", "icon-button element-panel-close");
    close.type = "button";
    close.setAttribute("aria-label", gettext("Close"));
    close.title = gettext("Close");
    close.append(icon("close"));
    close.addEventListener("click", () => this.closePanel());
    head.append(title, close);
    const body = el("div", "element-panel-body");
    panel.append(head, body);
    document.body.append(panel);
    return panel;
  }

  openPanel(element, opener) {
    this.opener?.setAttribute("aria-expanded", "false");
    this.opener = opener ?? null;
    this.opener?.setAttribute("aria-expanded", "true");
    this.panel.querySelector(".element-panel-title").textContent = element.name;
    const body = this.panel.querySelector(".element-panel-body");
    body.replaceChildren(elementContent(element, { inPanel: true }));
    if (element.type !== "file") body.append(downloadLink(element));
    this.panel.hidden = false;
    this.panel.dataset.elementId = element.id;
    document.body.classList.add("element-panel-open");
    this.panel.querySelector(".element-panel-close").focus();
  }

  closePanel() {
    if (this.panel.hidden) return;
    this.panel.hidden = true;
    this.panel.querySelector(".element-panel-body").replaceChildren();
    delete this.panel.dataset.elementId;
    document.body.classList.remove("element-panel-open");
    this.opener?.setAttribute("aria-expanded", "false");
    this.opener?.focus();
    this.opener = null;
  }

  /** Learn elements (an `element` event, or a read's `elements`) and draw them. */
  add(list) {
    const touched = new Set();
    for (const element of list ?? []) {
      if (!element?.id || !element.url) continue;
      this.byId.set(element.id, element);
      if (element.forId) touched.add(element.forId);
    }
    for (const stepId of touched) this.redraw(stepId);
  }

  /** `remove_element {id, forId}`. */
  remove(data) {
    const element = this.byId.get(data?.id);
    if (!element) return;
    this.byId.delete(data.id);
    if (this.panel.dataset.elementId === data.id) this.closePanel();
    if (element.forId) this.redraw(element.forId);
  }

  clear() {
    this.byId.clear();
    this.boxes.clear();
    this.closePanel();
  }

  redraw(stepId) {
    this.boxes.delete(stepId);
    const node = this.nodeFor(stepId);
    if (node) this.decorate(node, { id: stepId });
  }

  /** Put a step's elements under it (after every redraw of the step: the same nodes, so an
   * image or plot is not loaded again while a reply streams). */
  decorate(node, step) {
    let box = this.boxes.get(step.id);
    if (!box) {
      const mine = [...this.byId.values()].filter((e) => e.forId === step.id);
      node.querySelector(":scope > .msg-elements")?.remove();
      if (!mine.length) return;
      box = el("div", "msg-elements");
      for (const element of mine) box.append(this.view(element));
      this.boxes.set(step.id, box);
    }
    const actions = node.querySelector(":scope > .msg-actions");
    if (box.parentNode !== node || (actions && box.nextSibling !== actions)) node.insertBefore(box, actions);
  }

  view(element) {
    if (element.display === "side" || element.display === "page") {
      const link = el("button", "element-link");
      link.type = "button";
      link.dataset.elementId = element.id;
      link.append(icon("panel"), el("span", null, element.name));
      link.setAttribute("aria-expanded", "false");
      link.setAttribute("aria-controls", "element-panel");
      link.addEventListener("click", () => this.openPanel(element, link));
      return link;
    }
    return elementContent(element);
  }
}
