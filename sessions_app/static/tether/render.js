// Turning steps into DOM. Message text is markdown rendered by marked, and marked's HTML is
// sanitised by DOMPurify into a DOM fragment before it touches the page: no string from a
// message is ever assigned to innerHTML. Raw HTML inside the markdown is not even passed
// through: it is shown as the text it is. Code blocks are highlighted by highlight.js, whose
// HTML goes through DOMPurify as well (spans with its classes, nothing else). LaTeX is found
// by math.js while marked tokenizes and typeset by KaTeX after sanitising.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";
import { highlightedHtml } from "./code.js";
import { gettext, interpolate, ngettext } from "./i18n.js";
import { mathExtension, renderMath } from "./math.js";
import { copyButton } from "./copy.js";
import { photosOf } from "./photos.js";
import { pendingStatus } from "./reconcile.js";
import { fillStepItem, isStepEntry } from "./steps.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const markdown = new Marked(
  {
    gfm: true,
    breaks: true,
    renderer: {
      // Block and inline HTML in a message is text, not markup.
      html({ text }) {
        return escapeHtml(text);
      },
    },
  },
  mathExtension,
);

// The only classes a message may carry are marked's code-block language and highlight.js's
// token classes ("hljs-title function_"), and math.js's placeholders; raw HTML in a message
// never reaches here as markup.
const ALLOWED_CLASS = /^(language-[\w+-]+|hljs-[\w-]+|[a-z]+_|math|math-inline|math-display|math-too-long)$/;
DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
  if (data.attrName !== "class") return;
  const classes = data.attrValue.trim().split(/\s+/);
  if (!classes.every((name) => ALLOWED_CLASS.test(name))) data.keepAttr = false;
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.tagName === "IMG") {
    node.setAttribute("loading", "lazy");
    node.setAttribute("referrerpolicy", "no-referrer");
  }
});

const PURIFY_CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option", "iframe"],
  FORBID_ATTR: ["style", "id"],
};
const HIGHLIGHT_CONFIG = { RETURN_DOM_FRAGMENT: true, ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] };

/** Markdown text as a sanitised DocumentFragment, code blocks highlighted, with a copy button. */
export function markdownFragment(text) {
  const fragment = DOMPurify.sanitize(markdown.parse(String(text ?? "")), PURIFY_CONFIG);
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = /language-([\w+-]+)/.exec(code?.getAttribute("class") ?? "")?.[1];
    // The code as written: marked ends a block's text with a newline the fence did not have.
    const raw = (code ?? pre).textContent.replace(/\n$/, "");
    const html = code ? highlightedHtml(raw, language) : null;
    if (html != null) {
      code.replaceChildren(DOMPurify.sanitize(html, HIGHLIGHT_CONFIG));
      code.classList.add("hljs");
    }
    const wrapper = el("div", "code-block");
    const bar = el("div", "code-bar");
    bar.append(el("span", "code-lang", language ?? gettext("code")));
    bar.append(copyButton({ className: "copy-code", label: gettext("Copy code"), text: () => raw }));
    pre.replaceWith(wrapper);
    wrapper.append(bar, pre);
  }
  renderMath(fragment);
  return fragment;
}

// Icons as inline SVG paths (24x24, stroked), so they need no icon font or emoji glyphs.
const ICONS = {
  pencil: "M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4",
  trash: "M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13M10 11v6M14 11v6",
  close: "M6 6l12 12M18 6L6 18",
  // A thumb raised from a fist; thumbs down is the same turned over (class icon-flip).
  thumb: "M7 11v9H4v-9h3zM7 11l3.5-7c1.4 0 2.6 1.1 2.2 2.8L12 10h5.6a2 2 0 012 2.3l-1.2 6A2 2 0 0116.4 20H7",
  download: "M12 4v11M7 10l5 5 5-5M5 20h14",
  panel: "M4 5h16v14H4zM14 5v14",
  check: "M5 12l5 5 9-10",
};

export function icon(name) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", ICONS[name]);
  svg.append(path);
  return svg;
}

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

function photoCount(count) {
  return interpolate(ngettext("%(count)s photo", "%(count)s photos", count), { count });
}

function photoList(photos) {
  const list = el("div", "msg-photos");
  for (const photo of photos) {
    if (photo.missing) {
      list.append(el("span", "photo-missing", gettext("[image not displayed]")));
      continue;
    }
    const img = el("img", "photo");
    img.loading = "lazy";
    img.decoding = "async";
    img.alt = photo.alt ?? gettext("Attached photo");
    img.src = photo.src;
    list.append(img);
  }
  return list;
}

const ROLE = {
  user_message: ["user", gettext("You")],
  assistant_message: ["assistant", gettext("Assistant")],
  system_message: ["system", gettext("System")],
};

function roleOf(step) {
  if (step.isError) return ["error", step.name && step.name !== "assistant" ? step.name : gettext("Error")];
  if (ROLE[step.type]) return ROLE[step.type];
  return ["tool", step.name || step.type || gettext("Step")];
}

function avatarOf(step) {
  const name = step.name && step.name !== "assistant" ? String(step.name) : "Tether";
  const avatar = el("span", "msg-avatar", name.trim().charAt(0).toUpperCase() || "T");
  avatar.setAttribute("aria-hidden", "true");
  return avatar;
}

/** Whether an assistant message answers something, and so takes thumbs and Copy: not a
 * notice (a question the app asks, a stop's notice: `metadata.notice`, set by the server)
 * nor a greeting (`opening`: before the thread's first user message, chat.js says). */
export function answersSomething(step) {
  return !step.metadata?.notice && !step.opening;
}

/** A transcript step as a list item (`<li class="msg ...">`), filled by fillStep(). */
export function stepElement(step) {
  const item = el("li", "msg");
  item.dataset.id = step.id;
  fillStep(item, step);
  return item;
}

export function fillStep(item, step) {
  if (isStepEntry(step)) return fillStepItem(item, step); // tool calls and other steps
  const [role, label] = roleOf(step);
  item.className = `msg msg-${role}`;
  item.dataset.type = step.type ?? "";
  item.dataset.seq = step.seq ?? "";
  item.toggleAttribute("data-streaming", Boolean(step.streaming));
  item.setAttribute("aria-busy", step.streaming ? "true" : "false");
  if (step.metadata?.notice) item.dataset.notice = String(step.metadata.notice);
  else delete item.dataset.notice;
  const author = el("div", "msg-author", label);
  const body = el("div", "msg-body");
  if (role === "user") {
    body.classList.add("plain");
    body.textContent = step.output ?? "";
  } else {
    body.append(markdownFragment(step.output ?? ""));
  }
  // The assistant's avatar: the app's initial (the name it gives its messages), or "T".
  const parts = role === "assistant" ? [avatarOf(step), author, body] : [author, body];
  const photos = photosOf(step.content);
  if (photos.length) parts.push(photoList(photos));
  // The cursor ends the text's last line (a paragraph's), not a line of its own.
  if (step.streaming) {
    const last = body.lastElementChild;
    (last && /^(P|LI|H[1-6])$/.test(last.tagName) ? last : body).append(el("span", "cursor", ""));
  }
  // A reply cut by a stop is kept as far as it got; the server marks it in its metadata, so
  // the marker is there after a reload too. A reply this page saw cut off without word from
  // the server (its turn ended while it streamed) says so as well.
  const stopped = Boolean(step.metadata?.interrupted);
  item.toggleAttribute("data-interrupted", stopped || Boolean(step.interrupted));
  if (stopped) parts.push(el("div", "msg-status msg-stopped", gettext("Stopped: the reply was cut short here")));
  else if (step.interrupted) parts.push(el("div", "msg-status msg-stopped", gettext("Interrupted")));
  // A finished reply can be copied whole, as the markdown it was written in; its feedback bar
  // (feedback.js) joins this row.
  if (role === "assistant" && !step.streaming && step.output && answersSomething(step)) {
    const actions = el("div", "msg-actions");
    const text = String(step.output);
    actions.append(copyButton({ className: "copy-message", label: gettext("Copy message"), text: () => text }));
    parts.push(actions);
  }
  item.replaceChildren(...parts);
}

/** A sent message not transcribed yet; what it says is `pendingStatus`'s decision. */
export function pendingElement(item, { onRetry } = {}) {
  const { state, label, canRetry } = pendingStatus(item);
  const node = el("li", "msg msg-user pending");
  node.dataset.id = item.id;
  node.dataset.state = state;
  const body = el("div", "msg-body plain", item.text ?? "");
  body.id = `pending-text-${item.id}`;
  const parts = [el("div", "msg-author", gettext("You")), body];
  const previews = item.files?.length
    ? item.files.filter((f) => f.url).map((f) => ({ src: f.url, alt: f.name }))
    : photosOf(item.images);
  if (previews.length) parts.push(photoList(previews));
  const others = (item.files ?? []).filter((f) => !f.url); // files that are not photos: named
  if (others.length) parts.push(el("div", "msg-photos-note", others.map((f) => f.name).join(", ")));
  else if (item.imageCount) parts.push(el("div", "msg-photos-note", photoCount(item.imageCount)));
  const status = el("div", "msg-status", label);
  if (canRetry && onRetry) {
    const again = el("button", "send-again", gettext("Send again"));
    again.type = "button";
    again.setAttribute("aria-describedby", body.id); // which message: its text
    again.addEventListener("click", () => {
      again.disabled = true; // one click, one send
      onRetry(item.id);
    });
    status.append(" ", again);
  }
  parts.push(status);
  node.replaceChildren(...parts);
  return node;
}
