// Action buttons under messages and the app's questions (asks).
//
// A message's buttons come with its step (`step.metadata.actions`); a click is `action_call`,
// and the app's callback runs on the server. An ask (`ask {msg, spec}`, or bootstrap's `asks`
// after a reload) shows a panel above the composer with the time left:
//   - text: the composer answers it (the next message sent is the answer);
//   - action: the buttons under the question answer it;
//   - file: a file picker limited to the ask's types, size and count; the files are uploaded
//     (POST /api/uploads/) and named in the answer.
// Answers go out as `ask_answer {askId, answer}`; the server takes one answer per ask, whichever
// tab sends it, and says `clear_ask` to every tab, which closes the panel.

import * as api from "./api.js";
import { gettext, interpolate, ngettext } from "./i18n.js";

// A node with a class and text (render.js has the same; it is not imported so that this module
// loads without the markdown stack, e.g. in node's unit tests).
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

/** The `accept` attribute of a file input for Chainlit's `accept` (types, or {type: [exts]}). */
export function acceptAttribute(accept) {
  if (!accept) return "";
  if (Array.isArray(accept)) return accept.join(",");
  return Object.entries(accept)
    .flatMap(([type, exts]) => [type, ...(exts ?? [])])
    .join(",");
}

/** Whether `file` is of a type Chainlit's `accept` lists (none listed: any). */
export function accepts(accept, file) {
  const listed = acceptAttribute(accept).split(",").map((t) => t.trim().toLowerCase()).filter(Boolean);
  if (!listed.length) return true;
  const type = (file.type || "").toLowerCase();
  const name = (file.name || "").toLowerCase();
  return listed.some((t) =>
    t.startsWith(".") ? name.endsWith(t) : t.endsWith("/*") ? type.startsWith(t.slice(0, -1)) : t === type,
  );
}

// A long question is quoted in part in the panel (the whole of it is in the conversation).
const QUESTION_CHARS = 160;

function questionText(text) {
  const plain = String(text ?? "").replace(/\s+/g, " ").trim();
  return plain.length > QUESTION_CHARS ? `${plain.slice(0, QUESTION_CHARS - 1)}…` : plain;
}

export class Asks {
  /**
   * `socket`: the page's socket; `form` and `input`: the composer (the panel goes above it);
   * `onError(text)`: how a failure is told.
   */
  constructor({ socket, form, input, onError }) {
    this.socket = socket;
    this.form = form;
    this.input = input;
    this.onError = onError;
    this.open = new Map(); // ask id -> {askId, stepId, type, spec, deadline}
    this.rows = new Map(); // step id -> {item, step}: messages with buttons, to redraw them
    this.placeholder = input.placeholder;
    this.panel = el("div", "ask-panel");
    this.panel.id = "ask-panel";
    this.panel.setAttribute("role", "region");
    this.panel.setAttribute("aria-label", gettext("Question from the assistant"));
    this.panel.hidden = true;
    form.before(this.panel);
    this.timer = null;
  }

  // --- buttons under messages --------------------------------------------------------------

  /** Put (or refresh) a message's buttons at the end of its element. */
  decorate(item, step) {
    const actions = step.metadata?.actions ?? [];
    const id = String(step.id);
    if (!actions.length) {
      this.rows.delete(id);
      return;
    }
    this.rows.set(id, { item, step });
    const ask = this.askFor(id, "action");
    const row = el("div", "msg-buttons");
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", ask ? gettext("Choose an answer") : gettext("Actions"));
    for (const action of actions) {
      const button = el("button", ask ? "action-button ask-choice" : "action-button", action.label || action.name);
      button.type = "button";
      button.dataset.actionId = action.id;
      if (action.tooltip) button.title = action.tooltip;
      button.addEventListener("click", () => (ask ? this.answer(ask, action, button) : this.call(action, button)));
      row.append(button);
    }
    item.querySelector(":scope > .msg-buttons")?.remove();
    item.querySelector(":scope > .msg-body")?.after(row);
  }

  redraw(stepId) {
    const row = this.rows.get(String(stepId));
    if (row) this.decorate(row.item, row.step);
  }

  /** `remove_action`: the app took a button off its message. */
  removeAction(action) {
    const row = this.rows.get(String(action?.forId));
    if (!row) return;
    const actions = (row.step.metadata?.actions ?? []).filter((a) => a.id !== action.id);
    row.step = { ...row.step, metadata: { ...row.step.metadata, actions } };
    this.decorate(row.item, row.step);
  }

  async call(action, button) {
    button.disabled = true;
    try {
      const answer = await this.socket.emitWithAck("action_call", { action: { id: action.id, forId: action.forId } });
      if (answer?.error) this.onError(interpolate(gettext("The action failed: %(error)s"), { error: answer.error }));
    } finally {
      button.disabled = false;
    }
  }

  // --- asks ---------------------------------------------------------------------------------

  askFor(stepId, type) {
    for (const ask of this.open.values()) if (ask.stepId === stepId && ask.type === type) return ask;
    return null;
  }

  /** The newest ask still open, if any. */
  current() {
    return [...this.open.values()].at(-1) ?? null;
  }

  /** `ask` (or bootstrap's `asks`): show it until it is answered or cleared. */
  show(payload) {
    const spec = payload?.spec;
    if (!spec?.askId) return;
    this.open.set(spec.askId, {
      askId: spec.askId,
      stepId: String(spec.step_id),
      type: spec.type,
      question: typeof payload.msg?.output === "string" ? payload.msg.output : "",
      spec,
      deadline: Date.now() + Number(spec.timeout ?? 0) * 1000,
    });
    this.redraw(spec.step_id);
    this.render();
  }

  /** `clear_ask`: one ask (`{askId}`) or, without one, every ask is closed; with a `reason`
   * (the server that asked stopped), the page says why the question went away. */
  clear(data) {
    const cleared = data?.askId ? [this.open.get(data.askId)].filter(Boolean) : [...this.open.values()];
    for (const ask of cleared) {
      this.open.delete(ask.askId);
      this.redraw(ask.stepId);
    }
    if (data?.reason && cleared.length) {
      this.onError(gettext("This question was closed: the server that asked it stopped. Send your message again."));
    }
    this.render();
  }

  answeringText() {
    return this.current()?.type === "text";
  }

  /** Send the composer's text as the answer of the open text ask. */
  answerText(text) {
    const ask = this.current();
    if (ask?.type === "text") this.answer(ask, { output: text });
  }

  async answer(ask, answer, control) {
    if (control) control.disabled = true;
    try {
      const result = await this.socket.emitWithAck("ask_answer", { askId: ask.askId, answer });
      if (result?.error) {
        this.onError(interpolate(gettext("Your answer was not taken: %(error)s"), { error: result.error }));
        return;
      }
      this.clear({ askId: ask.askId });
      this.input.focus(); // the buttons answered are gone: the composer is where the user goes on
    } finally {
      if (control) control.disabled = false;
    }
  }

  render() {
    const ask = this.current();
    clearInterval(this.timer);
    this.timer = null;
    this.form.dataset.answering = ask?.type ?? "";
    this.input.placeholder = ask?.type === "text" ? gettext("Type your answer") : this.placeholder;
    if (!ask) {
      this.panel.hidden = true;
      this.panel.replaceChildren();
      return;
    }
    const hints = {
      text: gettext("Your next message is the answer."),
      action: gettext("Choose one of the buttons under the question."),
      file: gettext("Choose or drop the files it asks for."),
    };
    // The question itself, so that it stays in sight however the list is scrolled.
    const heading = el("p", "ask-question");
    heading.append(el("span", "ask-from", gettext("The assistant asks:")), " ", el("q", null, questionText(ask.question)));
    const parts = [...(ask.question ? [heading] : []), el("p", "ask-hint", hints[ask.type] ?? "")];
    if (ask.type === "file") parts.push(this.filePicker(ask));
    const clock = el("p", "ask-timer");
    clock.setAttribute("aria-live", "off");
    parts.push(clock);
    this.panel.replaceChildren(...parts);
    this.panel.hidden = false;
    const tick = () => {
      const left = Math.max(0, Math.ceil((ask.deadline - Date.now()) / 1000));
      clock.textContent = left
        ? interpolate(ngettext("%(seconds)s second left to answer", "%(seconds)s seconds left to answer", left), {
            seconds: left,
          })
        : gettext("Time is up.");
    };
    tick();
    this.timer = setInterval(tick, 1000);
    if (ask.type === "action") this.rows.get(ask.stepId)?.item.querySelector(".ask-choice")?.focus();
    else if (ask.type === "text") this.input.focus();
  }

  /** A drop zone with a styled "Choose files" button (the native input stays, hidden, for the
   * keyboard and screen readers); a file of the wrong type or size is refused as it is chosen. */
  filePicker(ask) {
    const { accept, max_files: maxFiles = 1, max_size_mb: maxMb = 2 } = ask.spec;
    const box = el("div", "ask-files drop-zone");
    let chosen = [];
    const input = el("input", "visually-hidden");
    input.type = "file";
    input.id = "ask-file-input";
    input.accept = acceptAttribute(accept);
    input.multiple = maxFiles > 1;
    const label = el("label", "button-like", gettext("Choose files"));
    label.htmlFor = input.id;
    const drop = el("span", "drop-hint muted", gettext("or drop them here"));
    const names = el("ul", "ask-chosen");
    names.setAttribute("aria-live", "polite");
    const limits = el(
      "p",
      "ask-limits",
      interpolate(ngettext("Up to %(count)s file of at most %(size)s MB", "Up to %(count)s files of at most %(size)s MB each", maxFiles), {
        count: maxFiles,
        size: maxMb,
      }),
    );
    limits.id = "ask-file-limits";
    input.setAttribute("aria-describedby", limits.id);
    const send = el("button", "primary", gettext("Send files"));
    send.type = "button";
    send.disabled = true;
    const choose = (files) => {
      const refused = files.find((f) => !accepts(accept, f));
      if (refused) {
        this.onError(interpolate(gettext("%(name)s is not a type this question takes."), { name: refused.name }));
        return;
      }
      const big = files.find((f) => f.size > maxMb * 1024 * 1024);
      if (big) {
        this.onError(interpolate(gettext("%(name)s is over %(size)s MB."), { name: big.name, size: maxMb }));
        return;
      }
      chosen = [...chosen, ...files].slice(-maxFiles);
      names.replaceChildren(...chosen.map((f) => el("li", null, f.name)));
      send.disabled = chosen.length === 0;
    };
    input.addEventListener("change", () => {
      choose([...input.files]);
      input.value = "";
    });
    box.addEventListener("dragover", (event) => {
      event.preventDefault();
      box.dataset.over = "true";
    });
    box.addEventListener("dragleave", () => delete box.dataset.over);
    box.addEventListener("drop", (event) => {
      event.preventDefault();
      delete box.dataset.over;
      choose([...(event.dataTransfer?.files ?? [])]);
    });
    send.addEventListener("click", () => this.sendFiles(ask, chosen, send));
    box.append(input, label, drop, send, names, limits);
    return box;
  }

  async sendFiles(ask, files, button) {
    const { max_files: maxFiles = 1, max_size_mb: maxMb = 2 } = ask.spec;
    if (!files.length) return this.onError(gettext("Choose a file first."));
    if (files.length > maxFiles) return this.onError(interpolate(gettext("At most %(count)s files."), { count: maxFiles }));
    const big = files.find((f) => f.size > maxMb * 1024 * 1024);
    if (big) return this.onError(interpolate(gettext("%(name)s is over %(size)s MB."), { name: big.name, size: maxMb }));
    button.disabled = true;
    try {
      const uploads = [];
      for (const file of files) uploads.push({ id: (await api.uploadPhoto(file)).id });
      await this.answer(ask, uploads);
    } catch (error) {
      this.onError(interpolate(gettext("Could not upload: %(error)s"), { error: error.message }));
    } finally {
      button.disabled = false;
    }
  }
}
