// Steps: the intermediate work of a turn (an app's chat.Step, an engine's tool call), shown
// collapsed. A step is a `<details>` whose summary says what ran, whether it is still running,
// failed or was stopped, and for how long; opened, it shows its input (when the step asks for
// it: `showInput`) and its output as code blocks, and the steps nested in it.
//
// A step whose parent is another step on the page is drawn inside that step's list of
// children; one whose parent is a message (the question being answered) stays in the
// transcript, in order, after it. Streamed tokens land in the step's output as they come
// (transcript.js keeps a step open to tokens until it has an `end`).

import { gettext, interpolate } from "./i18n.js";
import { el, markdownFragment } from "./render.js";

/** Whether a transcript entry is a step (not a message) and is drawn here. */
export function isStepEntry(step) {
  return Boolean(step) && !String(step.type ?? "").includes("message");
}

/** running | error | stopped | done: what the summary says of a step. */
export function stepState(step) {
  if (step.isError) return "error";
  if (step.metadata?.interrupted || step.interrupted) return "stopped";
  if (step.end == null || step.streaming) return "running";
  return "done";
}

/** How long a finished step ran, as text ("" while it runs or without times). */
export function stepDuration(step) {
  const start = Date.parse(step.start ?? "");
  const end = Date.parse(step.end ?? "");
  if (Number.isNaN(start) || Number.isNaN(end)) return "";
  const ms = Math.max(0, end - start);
  if (ms < 1000) return interpolate(gettext("%(ms)s ms"), { ms: Math.round(ms) });
  return interpolate(gettext("%(s)s s"), { s: (ms / 1000).toFixed(1) });
}

const LABELS = {
  running: () => gettext("Using %(name)s"),
  done: () => gettext("Used %(name)s"),
  error: () => gettext("%(name)s failed"),
  stopped: () => gettext("%(name)s was stopped"),
};

/** The summary's words: "Used search", "Using search", "search failed". */
export function stepLabel(step) {
  const name = step.name || step.type || gettext("a step");
  return interpolate(LABELS[stepState(step)](), { name });
}

/** The language the input is shown in: `showInput` names it ("json"), or true for text. */
function inputLanguage(step) {
  return typeof step.showInput === "string" && step.showInput !== "true" ? step.showInput : null;
}

/** `text` as a fenced block of `language`, through the messages' markdown (highlighting, a
 * copy button); the fence is longer than any run of backticks in the text. */
function codeFragment(text, language) {
  const longest = Math.max(2, ...(String(text).match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  return markdownFragment(`${fence}${language ?? ""}\n${text}\n${fence}`);
}

function section(className, heading, content) {
  const part = el("div", `step-section ${className}`);
  const body = el("div", "msg-body"); // styled as a message's text and code blocks
  body.append(content);
  part.append(el("div", "step-heading", heading), body);
  return part;
}

/** Draw `step` into its `<li>`, keeping its open state and its nested steps across redraws
 * (a streamed step is redrawn every frame). */
export function fillStepItem(item, step) {
  const state = stepState(step);
  item.className = "msg msg-step";
  item.dataset.type = step.type ?? "";
  item.dataset.seq = step.seq ?? "";
  item.dataset.state = state;
  item.setAttribute("aria-busy", state === "running" ? "true" : "false");
  let details = item.querySelector(":scope > details.step");
  if (!details) {
    details = el("details", "step");
    details.append(el("summary"), el("div", "step-body"), el("ul", "step-children"));
    details.lastChild.setAttribute("aria-label", gettext("Nested steps"));
    item.replaceChildren(details);
  }
  const [summary, body] = details.children;
  const status = el("span", `step-status step-status-${state}`);
  status.setAttribute("aria-hidden", "true");
  const label = el("span", "step-label", stepLabel(step));
  const kind = el("span", "step-type", step.type ?? "");
  const duration = el("span", "step-duration", state === "running" ? "" : stepDuration(step));
  summary.replaceChildren(status, label, kind, duration);

  const parts = [];
  if (step.showInput && step.input) {
    parts.push(section("step-input", gettext("Input"), codeFragment(step.input, inputLanguage(step))));
  }
  if (step.output) {
    const output = step.language ? codeFragment(step.output, step.language) : markdownFragment(step.output);
    parts.push(section("step-output", gettext("Output"), output));
  } else if (state === "running") {
    parts.push(el("div", "step-waiting", gettext("Running…")));
  }
  if (!step.output && state !== "running" && !(step.showInput && step.input)) {
    parts.push(el("div", "step-waiting", gettext("No output")));
  }
  body.replaceChildren(...parts);
}

/** Where a step's `<li>` goes: inside its parent step's children, when that step is on the
 * page; null for the transcript itself. */
export function containerFor(step, elements) {
  if (!isStepEntry(step) || !step.parentId) return null;
  const parent = elements.get(String(step.parentId));
  return parent?.querySelector(":scope > details.step > ul.step-children") ?? null;
}

/** Put `node` into `container` before the next entry (in transcript order) that lives there. */
export function insertInOrder(container, node, entries, step, elements) {
  let before = null;
  for (let i = entries.indexOf(step) + 1; i < entries.length; i += 1) {
    const other = elements.get(entries[i].id);
    if (other && other.parentNode === container) {
      before = other;
      break;
    }
  }
  if (node.parentNode !== container || node.nextSibling !== before) container.insertBefore(node, before);
}
