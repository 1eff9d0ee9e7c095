// Feedback on assistant messages: thumbs up / down under each finished reply, with an optional
// comment asked for in a small dialog. The page keeps the user's feedback by step id (what the
// transcript reads carry as `step.feedback`, and what this page gave since); the server keeps
// one per user and message (PUT /api/feedback gives or changes it, DELETE takes it back).
//
// Clicking a thumb that is not pressed opens the dialog (the comment is optional), and Submit
// gives that verdict; clicking the pressed thumb takes the feedback back; "Edit comment"
// reopens the dialog for the verdict given.

import * as api from "./api.js";
import { gettext, interpolate } from "./i18n.js";
import { answersSomething, el, icon } from "./render.js";

const VERDICTS = {
  1: { name: "up", label: gettext("Good reply"), title: gettext("Thumbs up") },
  0: { name: "down", label: gettext("Bad reply"), title: gettext("Thumbs down") },
};

/** Whether a step takes feedback: a finished assistant reply the server has stored (not a
 * greeting or a notice, which answer nothing). */
export function ratable(step) {
  return step.type === "assistant_message" && !step.streaming && !step.isError && answersSomething(step);
}

export class FeedbackControls {
  /**
   * `dialog`: the page's `<dialog>` (its form, textarea, title and cancel button inside);
   * `threadId()`: the thread on screen (null before its first message: nothing to rate yet);
   * `onError(text)`: how a failure is told.
   */
  constructor(dialog, { threadId, onError }) {
    this.byStep = new Map(); // step id -> {id, value, comment}
    this.dialog = dialog;
    this.threadId = threadId;
    this.onError = onError;
    this.busy = new Set(); // step ids with a request in flight
    this.asking = null; // {stepId, value} while the dialog is open
    this.bars = new Map(); // step id -> its bar element
    dialog.querySelector("form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.submitDialog();
    });
    dialog.querySelector("[data-cancel]").addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      const asked = this.asking;
      this.asking = null;
      // Back to the button that opened it, for keyboard users.
      if (asked) this.bars.get(asked.stepId)?.querySelector(`[data-value="${asked.value}"]`)?.focus();
    });
  }

  /** What a transcript read says of a step: its feedback, or none. */
  learn(step) {
    if (!ratable(step)) return;
    const id = String(step.id);
    if (step.feedback) this.byStep.set(id, step.feedback);
    else this.byStep.delete(id);
    this.redraw(id);
  }

  /** Put (or refresh) the feedback bar at the end of a message's element (its actions row). */
  decorate(item, step) {
    const id = String(step.id);
    if (!ratable(step)) {
      this.bars.delete(id);
      return;
    }
    const bar = this.bars.get(id) ?? this.makeBar(id);
    this.fill(bar, id);
    (item.querySelector(":scope > .msg-actions") ?? item).append(bar); // beside Copy
  }

  /** A message left the page (deleted): its bar goes too. */
  forget(stepId) {
    this.bars.delete(String(stepId));
  }

  redraw(stepId) {
    const bar = this.bars.get(stepId);
    if (bar) this.fill(bar, stepId);
  }

  redrawAll() {
    for (const id of this.bars.keys()) this.redraw(id);
  }

  makeBar(stepId) {
    const bar = el("div", "feedback");
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", gettext("Feedback on this reply"));
    bar.dataset.stepId = stepId;
    for (const value of [1, 0]) {
      const { name, label, title } = VERDICTS[value];
      const button = el("button", `icon-button feedback-${name}`);
      button.type = "button";
      button.dataset.value = String(value);
      button.title = title;
      button.setAttribute("aria-label", label);
      const glyph = icon("thumb");
      if (value === 0) glyph.classList.add("icon-flip");
      button.append(glyph);
      button.addEventListener("click", () => this.pick(stepId, value));
      bar.append(button);
    }
    const edit = el("button", "link-button feedback-edit", gettext("Edit comment"));
    edit.type = "button";
    edit.addEventListener("click", () => {
      const given = this.byStep.get(stepId);
      if (given) this.ask(stepId, given.value);
    });
    const comment = el("span", "feedback-comment");
    bar.append(comment, edit);
    this.bars.set(stepId, bar);
    return bar;
  }

  fill(bar, stepId) {
    const given = this.byStep.get(stepId);
    const disabled = !this.threadId() || this.busy.has(stepId);
    bar.dataset.value = given ? String(given.value) : "";
    for (const button of bar.querySelectorAll("[data-value]")) {
      const pressed = given != null && String(given.value) === button.dataset.value;
      button.setAttribute("aria-pressed", String(pressed));
      button.disabled = disabled;
      const { label } = VERDICTS[button.dataset.value];
      button.setAttribute("aria-label", pressed ? interpolate(gettext("%(verdict)s (given; press to take it back)"), { verdict: label }) : label);
    }
    const comment = bar.querySelector(".feedback-comment");
    comment.textContent = given?.comment ? interpolate(gettext("“%(comment)s”"), { comment: given.comment }) : "";
    comment.hidden = !given?.comment;
    const edit = bar.querySelector(".feedback-edit");
    edit.hidden = !given;
    edit.disabled = disabled;
    edit.textContent = given?.comment ? gettext("Edit comment") : gettext("Add a comment");
  }

  pick(stepId, value) {
    const given = this.byStep.get(stepId);
    if (given && given.value === value) this.remove(stepId);
    else this.ask(stepId, value);
  }

  ask(stepId, value) {
    this.asking = { stepId, value };
    const given = this.byStep.get(stepId);
    const { title } = VERDICTS[value];
    this.dialog.querySelector("[data-title]").textContent = interpolate(gettext("%(verdict)s: anything to add?"), { verdict: title });
    this.dialog.dataset.value = String(value);
    const text = this.dialog.querySelector("textarea");
    text.value = given?.value === value ? (given.comment ?? "") : "";
    this.dialog.showModal();
    text.focus();
  }

  async submitDialog() {
    const asked = this.asking;
    if (!asked) return;
    const comment = this.dialog.querySelector("textarea").value.trim();
    this.dialog.close();
    await this.give(asked.stepId, asked.value, comment);
  }

  async give(stepId, value, comment) {
    await this.request(stepId, async () => {
      const feedback = { forId: stepId, value, threadId: this.threadId() };
      if (comment) feedback.comment = comment;
      const answer = await api.setFeedback(feedback);
      this.byStep.set(stepId, { id: answer.feedbackId, forId: stepId, value, comment: comment || null });
    });
  }

  async remove(stepId) {
    const given = this.byStep.get(stepId);
    if (!given) return;
    await this.request(stepId, async () => {
      try {
        await api.deleteFeedback(given.id);
      } catch (error) {
        if (error.status !== 404) throw error; // already gone (another tab took it back)
      }
      this.byStep.delete(stepId);
    });
  }

  async request(stepId, work) {
    if (this.busy.has(stepId)) return;
    this.busy.add(stepId);
    this.redraw(stepId);
    try {
      await work();
    } catch (error) {
      this.onError(interpolate(gettext("Could not save your feedback: %(error)s"), { error: error.message }));
    } finally {
      this.busy.delete(stepId);
      this.redraw(stepId);
    }
  }
}
