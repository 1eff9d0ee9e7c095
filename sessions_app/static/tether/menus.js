// A menu button and its panel (the account menu): the button says whether it is open
// (aria-expanded); Esc or a click elsewhere closes it, and Esc gives the focus back to the button.

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
    if (open) (this.panel.querySelector("input:checked") ?? this.panel.querySelector("input, button"))?.focus();
  }
}
