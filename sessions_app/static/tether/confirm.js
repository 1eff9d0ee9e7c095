// An in-page confirmation (a modal <dialog>), in the page's style and language, instead of the
// browser's native box. Resolves true when confirmed; Esc, Cancel or the backdrop say no. The
// focus starts on Cancel (a destructive default is never one keypress away) and goes back to
// where it was.

import { gettext } from "./i18n.js";

export function confirmInPage(text, { confirmLabel = gettext("Delete") } = {}) {
  const opener = document.activeElement;
  const dialog = document.createElement("dialog");
  dialog.className = "confirm-dialog";
  dialog.setAttribute("aria-labelledby", "confirm-dialog-text");
  const body = document.createElement("p");
  body.id = "confirm-dialog-text";
  body.textContent = text;
  const actions = document.createElement("div");
  actions.className = "confirm-dialog-actions";
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.className = "quiet";
  cancel.textContent = gettext("Cancel");
  const ok = document.createElement("button");
  ok.type = "button";
  ok.className = "danger";
  ok.textContent = confirmLabel;
  actions.append(cancel, ok);
  dialog.append(body, actions);
  document.body.append(dialog);
  return new Promise((resolve) => {
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
      resolve(answer);
    };
    cancel.addEventListener("click", () => finish(false));
    ok.addEventListener("click", () => finish(true));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    dialog.addEventListener("click", (event) => event.target === dialog && finish(false));
    dialog.showModal();
    cancel.focus();
  });
}
