// The chat settings panel: the inputs an app declared with `chat.ChatSettings` (the
// `chat_settings` event, Chainlit's list of input dicts whose `initial` is the current value),
// drawn in a modal <dialog> opened from a button in the composer. The button shows only while
// the chat has declared settings. Confirm sends every value in one `chat_settings_change` (as
// Chainlit's client does); the server checks them against the declaration and, if one is
// refused, answers `{error, setting}`: the message goes next to that control and nothing is
// applied. Cancel (or Escape) forgets the edits. The server sends the panel again on every
// connect, so a reload shows the saved values.

import { gettext, interpolate } from "./i18n.js";
import { el } from "./render.js";

const SVG = "http://www.w3.org/2000/svg";

function slidersIcon() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", "M5 20v-6M5 10V4M12 20v-8M12 8V4M19 20v-4M19 12V4M2 14h6M9 8h6M16 16h6");
  svg.append(path);
  return svg;
}

/** A tags editor: the tags as removable chips, a text box that adds one on Enter or comma,
 * and the app's suggestions in a datalist. */
class TagsEditor {
  constructor(spec, controlId, describedBy) {
    this.tags = [...(spec.initial ?? [])];
    this.node = el("div", "settings-tags");
    this.list = el("ul", "settings-tag-list");
    this.list.setAttribute("aria-label", interpolate(gettext("%(label)s: tags"), { label: spec.label }));
    const row = el("div", "settings-tag-row");
    this.input = el("input");
    this.input.id = controlId;
    this.input.type = "text";
    this.input.autocomplete = "off";
    this.input.setAttribute("aria-describedby", describedBy);
    this.input.placeholder = gettext("Add a tag");
    if (spec.values?.length) {
      const datalist = el("datalist");
      datalist.id = `${controlId}-suggestions`;
      datalist.append(...spec.values.map((value) => Object.assign(el("option"), { value })));
      this.input.setAttribute("list", datalist.id);
      row.append(datalist);
    }
    const add = el("button", "quiet", gettext("Add"));
    add.type = "button";
    add.addEventListener("click", () => this.addTyped());
    this.input.addEventListener("keydown", (event) => {
      if ((event.key === "Enter" || event.key === ",") && !event.isComposing) {
        event.preventDefault(); // Enter adds a tag; it does not confirm the dialog
        this.addTyped();
      } else if (event.key === "Backspace" && !this.input.value && this.tags.length) {
        this.remove(this.tags.length - 1);
      }
    });
    row.prepend(this.input, add);
    this.node.append(this.list, row);
    this.render();
  }

  addTyped() {
    const tag = this.input.value.trim();
    if (tag && !this.tags.includes(tag)) this.tags.push(tag);
    this.input.value = "";
    this.render();
    this.input.focus();
  }

  remove(index) {
    this.tags.splice(index, 1);
    this.render();
    this.input.focus();
  }

  render() {
    this.list.replaceChildren(
      ...this.tags.map((tag, index) => {
        const chip = el("li", "settings-tag");
        const remove = el("button", "icon-button settings-tag-remove", "×");
        remove.type = "button";
        remove.setAttribute("aria-label", interpolate(gettext("Remove %(tag)s"), { tag }));
        remove.addEventListener("click", () => this.remove(index));
        chip.append(el("span", "", tag), remove);
        return chip;
      }),
    );
    this.list.hidden = this.tags.length === 0;
  }

  get value() {
    const typed = this.input.value.trim(); // typed but not added yet: the user means it
    return typed && !this.tags.includes(typed) ? [...this.tags, typed] : [...this.tags];
  }
}

/** A control for one input: `{node, control (what a label points at), value()}`. */
function makeControl(spec, controlId, describedBy) {
  const describe = (control) => {
    control.id = controlId;
    control.setAttribute("aria-describedby", describedBy);
    control.disabled = Boolean(spec.disabled);
    if (spec.tooltip) control.title = spec.tooltip;
    return control;
  };
  switch (spec.type) {
    case "select": {
      const select = describe(el("select"));
      for (const item of spec.items ?? []) {
        const option = el("option", "", item.label);
        option.value = item.value;
        select.append(option);
      }
      select.value = spec.initial ?? "";
      if (spec.initial == null) select.selectedIndex = -1;
      return { node: select, control: select, value: () => (select.selectedIndex < 0 ? null : select.value) };
    }
    case "switch":
    case "checkbox": {
      const box = describe(el("input"));
      box.type = "checkbox";
      if (spec.type === "switch") box.setAttribute("role", "switch");
      box.checked = Boolean(spec.initial);
      return { node: box, control: box, value: () => box.checked };
    }
    case "slider": {
      const wrap = el("div", "settings-slider");
      const range = describe(el("input"));
      range.type = "range";
      range.min = String(spec.min);
      range.max = String(spec.max);
      range.step = String(spec.step);
      range.value = String(spec.initial);
      const shown = el("output", "settings-slider-value", range.value);
      shown.htmlFor = controlId;
      range.addEventListener("input", () => (shown.textContent = range.value));
      wrap.append(range, shown);
      return { node: wrap, control: range, value: () => Number(range.value) };
    }
    case "numberinput": {
      const number = describe(el("input"));
      number.type = "number";
      for (const key of ["min", "max", "step"]) if (spec[key] != null) number[key] = String(spec[key]);
      if (spec.step == null) number.step = "any";
      number.value = spec.initial == null ? "" : String(spec.initial);
      if (spec.placeholder) number.placeholder = spec.placeholder;
      return {
        node: number,
        control: number,
        value: () => (number.value.trim() === "" ? null : Number(number.value)),
        // Empty is "not set", which only a number that was never set may stay.
        check: () =>
          (number.value.trim() === "" && spec.initial != null) || Number.isNaN(Number(number.value))
            ? gettext("Enter a number.")
            : "",
      };
    }
    case "textinput": {
      const text = describe(el(spec.multiline ? "textarea" : "input"));
      if (!spec.multiline) text.type = "text";
      else text.rows = 3;
      if (spec.max_length) text.maxLength = spec.max_length;
      if (spec.placeholder) text.placeholder = spec.placeholder;
      text.value = spec.initial ?? "";
      return { node: text, control: text, value: () => text.value };
    }
    case "tags": {
      const editor = new TagsEditor(spec, controlId, describedBy);
      editor.input.disabled = Boolean(spec.disabled);
      return { node: editor.node, control: editor.input, value: () => editor.value };
    }
    case "multiselect": {
      // A group of checkboxes; the field's label names the group (aria-labelledby).
      const group = el("div", "settings-choices");
      group.setAttribute("role", "group");
      group.setAttribute("aria-labelledby", `${controlId}-label`);
      group.setAttribute("aria-describedby", describedBy);
      const chosen = new Set(spec.initial ?? []);
      const boxes = (spec.items ?? []).map((item, index) => {
        const row = el("div", "settings-check-row");
        const box = el("input");
        box.type = "checkbox";
        box.id = index === 0 ? controlId : `${controlId}-${index}`;
        box.value = item.value;
        box.checked = chosen.has(item.value);
        box.disabled = Boolean(spec.disabled);
        const label = el("label", "", item.label);
        label.htmlFor = box.id;
        row.append(box, label);
        group.append(row);
        return box;
      });
      return {
        node: group,
        control: boxes[0] ?? group,
        value: () => boxes.filter((box) => box.checked).map((box) => box.value),
      };
    }
    default:
      return null; // a kind this page does not draw: its value is left as it is
  }
}

export class ChatSettingsPanel {
  /**
   * `anchor`: the element the settings button goes before (in the composer row);
   * `save(values)`: sends `chat_settings_change`, resolves to the server's answer (null when
   * accepted, `{error, setting?}` when refused); `onSaved()`: after a confirmed change.
   */
  constructor(anchor, { save, onSaved }) {
    this.inputs = [];
    this.save = save;
    this.onSaved = onSaved;
    this.controls = new Map(); // input id -> {control, value(), error element}
    this.button = el("button", "icon-button settings-button");
    this.button.type = "button";
    this.button.id = "settings-button";
    this.button.hidden = true;
    this.button.setAttribute("aria-haspopup", "dialog");
    this.button.title = gettext("Chat settings");
    this.button.append(slidersIcon(), el("span", "visually-hidden", gettext("Chat settings")));
    this.button.addEventListener("click", () => this.open());
    anchor.before(this.button);
    this.dialog = this.makeDialog();
    document.body.append(this.dialog);
  }

  makeDialog() {
    const dialog = el("dialog", "settings-dialog");
    dialog.id = "settings-dialog";
    dialog.setAttribute("aria-labelledby", "settings-dialog-title");
    this.form = el("form");
    this.form.noValidate = true; // our messages, next to the control, in the page's language
    const title = el("h2", "settings-dialog-title", gettext("Chat settings"));
    title.id = "settings-dialog-title";
    this.fields = el("div", "settings-fields");
    this.formError = el("p", "settings-error settings-form-error");
    this.formError.id = "settings-form-error";
    this.formError.setAttribute("role", "alert");
    this.formError.hidden = true;
    const actions = el("div", "settings-dialog-actions");
    const cancel = el("button", "quiet", gettext("Cancel"));
    cancel.type = "button";
    cancel.addEventListener("click", () => dialog.close());
    this.confirm = el("button", "primary", gettext("Confirm"));
    this.confirm.type = "submit";
    this.confirm.id = "settings-confirm";
    actions.append(cancel, this.confirm);
    this.form.append(title, this.fields, this.formError, actions);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    dialog.append(this.form);
    dialog.addEventListener("close", () => this.button.focus());
    return dialog;
  }

  get isOpen() {
    return this.dialog.open;
  }

  /** The panel the server sent (`chat_settings`); [] hides the button. */
  show(inputs) {
    this.inputs = Array.isArray(inputs) ? inputs : [];
    this.button.hidden = this.inputs.length === 0;
    if (this.dialog.open) this.render(); // what the user sees is what the server has
  }

  /** The chat changed (a new chat, another profile): no panel until its app declares one. */
  reset() {
    if (this.dialog.open) this.dialog.close();
    this.show([]);
  }

  /** The values shown, as the app reads them: what the last `chat_settings` said, plus what
   * this page confirmed since. */
  values() {
    return Object.fromEntries(this.inputs.map((spec) => [spec.id, spec.initial]));
  }

  open() {
    if (this.inputs.length === 0) return;
    this.render();
    this.dialog.showModal();
    this.controls.values().next().value?.control.focus();
  }

  render() {
    this.controls.clear();
    this.formError.hidden = true;
    this.fields.replaceChildren(
      ...this.inputs.map((spec, index) => {
        const controlId = `setting-${index}`;
        const field = el("div", `settings-field settings-field-${spec.type}`);
        field.dataset.settingId = spec.id;
        // A group's name is its own element (a <label> names one control, not a group).
        const label = el(spec.type === "multiselect" ? "span" : "label", "settings-label", spec.label);
        label.id = `${controlId}-label`;
        if (spec.type !== "multiselect") label.htmlFor = controlId;
        const description = el("p", "settings-description muted", spec.description ?? "");
        description.id = `${controlId}-description`;
        description.hidden = !spec.description;
        const error = el("p", "settings-error");
        error.id = `${controlId}-error`;
        error.hidden = true;
        // The tooltip shows on hover (`title`); screen readers get it as part of the description.
        const tooltip = el("span", "visually-hidden", spec.tooltip ?? "");
        tooltip.id = `${controlId}-tooltip`;
        const made = makeControl(spec, controlId, `${description.id} ${tooltip.id} ${error.id}`);
        if (!made) return field;
        this.controls.set(spec.id, { ...made, error });
        if (spec.type === "switch" || spec.type === "checkbox") {
          field.append(el("div", "settings-check-row"), description, tooltip, error);
          field.firstChild.append(made.node, label);
        } else {
          field.append(label, description, tooltip, made.node, error);
        }
        return field;
      }),
    );
  }

  showError(settingId, message) {
    const target = settingId != null ? this.controls.get(settingId) : null;
    if (!target) {
      this.formError.textContent = message;
      this.formError.hidden = false;
      return;
    }
    target.error.textContent = message;
    target.error.hidden = false;
    target.control.setAttribute("aria-invalid", "true");
    target.control.focus();
  }

  clearErrors() {
    this.formError.hidden = true;
    for (const { control, error } of this.controls.values()) {
      error.hidden = true;
      error.textContent = "";
      control.removeAttribute("aria-invalid");
    }
  }

  async submit() {
    this.clearErrors();
    for (const [id, { check }] of this.controls) {
      const problem = check?.();
      if (problem) {
        this.showError(id, problem);
        return;
      }
    }
    const values = Object.fromEntries([...this.controls].map(([id, { value }]) => [id, value()]));
    this.confirm.disabled = true;
    let answer;
    try {
      answer = await this.save(values);
    } catch {
      // Not connected, or no answer in time: nothing was applied, the dialog keeps the edits.
      answer = { error: gettext("Could not save the settings. Check your connection and try again.") };
    } finally {
      this.confirm.disabled = false;
    }
    if (answer?.error) {
      this.showError(answer.setting, answer.error);
      return;
    }
    this.inputs = this.inputs.map((spec) => (spec.id in values ? { ...spec, initial: values[spec.id] } : spec));
    this.dialog.close();
    this.onSaved?.();
  }
}
