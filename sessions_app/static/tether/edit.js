// Editing a sent message (Chainlit's edit_message): an "Edit" button on the user's messages,
// and an inline editor in place of the message's text. Saving emits edit_message; what the
// page then shows comes from the server's events alone (update_message for the message,
// delete_message for every later step, then the new answer), as in every other tab, so the
// page holds no copy of its own that could disagree with the transcript after a reload.

import { gettext } from "./i18n.js";
import { el, icon } from "./render.js";

/** A user message the server has transcribed (a pending send has no seq). */
const editable = (step) => step?.type === "user_message" && step.seq != null && !step.streaming;

export class MessageEditor {
  /**
   * @param {{enabled: boolean, save: (id: string, text: string) => Promise<object>,
   *          busy: () => boolean, onError: (text: string) => void, onSaved: () => void}} options
   *   `enabled`: the app answers edits (the page's config); `save` emits edit_message and
   *   resolves to its acknowledgement; `busy`: a reply is running (the server refuses then);
   *   `onSaved`: where the focus goes once an edit is taken (Edit is disabled while it is
   *   answered, so the focus cannot stay there).
   */
  constructor({ enabled, save, busy, onError, onSaved }) {
    this.enabled = enabled;
    this.save = save;
    this.busy = busy;
    this.onError = onError;
    this.onSaved = onSaved;
    this.editing = null; // {id, draft, saving}: the message whose editor is open
  }

  /** Give a drawn user message its Edit button, or its editor while it is being edited. */
  decorate(item, step) {
    if (!this.enabled || !editable(step)) return;
    const id = String(step.id);
    if (this.editing?.id === id) {
      this.drawEditor(item, step);
      return;
    }
    let actions = item.querySelector(":scope > .msg-actions");
    if (!actions) {
      actions = el("div", "msg-actions");
      item.append(actions);
    }
    const button = el("button", "icon-button edit-message");
    button.type = "button";
    button.append(icon("pencil"));
    button.setAttribute("aria-label", gettext("Edit message"));
    const body = item.querySelector(":scope > .msg-body");
    if (body) {
      body.id = `msg-text-${id}`;
      button.setAttribute("aria-describedby", body.id); // which message: its text
    }
    button.disabled = this.busy();
    button.addEventListener("click", () => {
      if (this.busy()) return;
      this.editing = { id, draft: String(step.output ?? ""), saving: false };
      this.drawEditor(item, step);
    });
    actions.append(button);
  }

  /** A reply started or ended: Edit is offered only between replies. */
  setBusy(busy) {
    for (const button of document.querySelectorAll(".edit-message")) button.disabled = busy;
  }

  drawEditor(item, step) {
    const editing = this.editing;
    const form = el("form", "edit-form");
    const area = el("textarea", "edit-input");
    area.value = editing.draft;
    area.rows = Math.min(8, Math.max(2, editing.draft.split("\n").length));
    area.setAttribute("aria-label", gettext("Edit your message"));
    area.addEventListener("input", () => (editing.draft = area.value));
    const hint = el("p", "edit-hint", gettext("Saving replaces the replies after this message."));
    hint.id = `edit-hint-${editing.id}`;
    area.setAttribute("aria-describedby", hint.id);
    const buttons = el("div", "edit-actions");
    const cancel = el("button", "quiet", gettext("Cancel"));
    cancel.type = "button";
    const save = el("button", "primary", gettext("Save"));
    save.type = "submit";
    save.disabled = editing.saving;
    buttons.append(cancel, save);
    form.append(area, hint, buttons);

    const close = (saved = false) => {
      this.editing = null;
      item.dispatchEvent(new CustomEvent("tether:redraw", { bubbles: true, detail: { id: editing.id } }));
      if (saved) this.onSaved?.();
      else item.querySelector(".edit-message")?.focus();
    };
    const submit = async () => {
      const text = area.value;
      if (editing.saving || !text.trim()) return;
      if (text === String(step.output ?? "")) return close(); // nothing changed
      editing.saving = true;
      save.disabled = true;
      let answer;
      try {
        answer = await this.save(editing.id, text);
      } catch (error) {
        answer = { error: error?.message || gettext("no answer") };
      }
      editing.saving = false;
      if (this.editing !== editing) return;
      if (answer?.error) {
        save.disabled = false;
        this.onError(answer.error);
        area.focus();
        return;
      }
      close(true);
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      submit();
    });
    cancel.addEventListener("click", () => close());
    area.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault(); // Escape here cancels the edit, never stops a reply
        event.stopPropagation();
        close();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        submit();
      }
    });
    item.classList.add("editing");
    const body = item.querySelector(":scope > .msg-body");
    item.querySelector(":scope > .msg-actions")?.remove();
    if (body) body.replaceWith(form);
    else item.append(form);
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  }
}
