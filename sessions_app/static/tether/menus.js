// Menus that open from a button: the button says whether its panel is open (aria-expanded); Esc
// or a click elsewhere closes it, and Esc gives the focus back to the button.
//   - MenuButton: a panel of controls (the account menu: who, the theme, signing out);
//   - ListboxMenu: a styled replacement for a <select> (the chat profile picker): the panel is
//     a listbox of options, chosen by click or from the keyboard.

export class MenuButton {
  constructor(button, panel) {
    this.button = button;
    this.panel = panel;
    button.addEventListener("click", () => this.set(panel.hidden));
    panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      event.preventDefault(); // the page's Esc (stop a reply) is not this one
      this.set(false);
      button.focus();
    });
    document.addEventListener("pointerdown", (event) => {
      if (!panel.hidden && !panel.contains(event.target) && !button.contains(event.target)) this.set(false);
    });
  }

  get isOpen() {
    return !this.panel.hidden;
  }

  set(open) {
    this.panel.hidden = !open;
    this.button.setAttribute("aria-expanded", String(open));
    if (!open) return;
    const chosen = this.panel.querySelector('input:checked, [role="option"][aria-selected="true"]');
    (chosen ?? this.panel.querySelector('input, button, [role="option"]'))?.focus();
  }
}

/**
 * A button showing the chosen option and a listbox under it (the APG's collapsible listbox):
 * the button opens it (click, Enter, Space, or the arrow keys); the focus goes to the chosen
 * option; arrows, Home and End move it; Enter, Space or a click choose, close the list and give
 * the focus back to the button; Esc or Tab close it without choosing, the focus on the button. `onChoose(value)` hears
 * a choice, whether or not it changed anything (as a <select>'s change would not: the caller
 * compares). The options are the caller's nodes, so they can show icons and descriptions.
 */
export class ListboxMenu {
  /** `button`: the menu's button; `list`: a `role="listbox"` element, hidden. */
  constructor(button, list, { onChoose }) {
    this.button = button;
    this.list = list;
    this.onChoose = onChoose;
    this.menu = new MenuButton(button, list);
    button.setAttribute("aria-haspopup", "listbox");
    button.addEventListener("keydown", (event) => {
      if ((event.key === "ArrowDown" || event.key === "ArrowUp") && !this.menu.isOpen) {
        event.preventDefault();
        this.menu.set(true);
      }
    });
    list.addEventListener("keydown", (event) => this.key(event));
    list.addEventListener("click", (event) => {
      const option = event.target.closest('[role="option"]');
      if (option && list.contains(option)) this.choose(option);
    });
  }

  /** The options, in order: each a node with `role="option"`, `data-value`, `aria-selected`. */
  setOptions(options) {
    const hadFocus = this.list.contains(document.activeElement); // redrawn while open (a late read)
    for (const option of options) option.tabIndex = -1;
    this.list.replaceChildren(...options);
    if (hadFocus) (options.find((o) => o.getAttribute("aria-selected") === "true") ?? options[0] ?? this.button).focus();
  }

  options() {
    return [...this.list.querySelectorAll('[role="option"]')];
  }

  key(event) {
    const options = this.options();
    const at = options.indexOf(document.activeElement);
    const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: options.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      options[Math.max(0, Math.min(options.length - 1, moves[event.key]))]?.focus();
    } else if ((event.key === "Enter" || event.key === " ") && at >= 0) {
      event.preventDefault();
      this.choose(options[at]);
    } else if (event.key === "Tab") {
      event.preventDefault(); // closed, the list has no place in the tab order: back to the button
      this.menu.set(false);
      this.button.focus();
    }
  }

  choose(option) {
    this.menu.set(false);
    this.button.focus();
    this.onChoose(option.dataset.value);
  }
}
