// What an empty chat offers before its first message (GET /api/project/settings): the app's
// chat profiles as a picker (a button and its listbox, as Chainlit's: each profile with its icon
// and description) and its starters as buttons. After the first message the picker shows the
// chat's profile read-only (a thread keeps its profile) and the starters go away.

import * as api from "./api.js";
import { gettext, interpolate } from "./i18n.js";
import { ListboxMenu } from "./menus.js";
import { isServerPath } from "./page_urls.js";
import { el, icon, markdownFragment } from "./render.js";

/** An icon (only the server's own: the page loads nothing from other origins, its CSP) and a
 * name: how a profile is shown on the button, in the list and read-only. */
function profileLabel(profile) {
  const parts = [];
  if (isServerPath(profile?.icon)) {
    const image = el("img", "profile-icon");
    image.src = profile.icon;
    image.alt = "";
    parts.push(image);
  }
  parts.push(el("span", "profile-name", profile?.display_name || profile?.name || ""));
  return parts;
}

/** One profile in the listbox: its label and its description, both its name (what it shows is
 * what it is called: WCAG's label in name). */
function profileOption(profile, index, selected) {
  const option = el("li", "profile-option");
  option.id = `chat-profile-option-${index}`;
  option.setAttribute("role", "option");
  option.setAttribute("aria-selected", String(selected));
  option.dataset.value = profile.name;
  const label = el("span", "profile-option-label");
  label.append(...profileLabel(profile));
  const mark = icon("check");
  mark.classList.add("profile-check");
  option.append(mark, label);
  if (profile.markdown_description) {
    const about = el("div", "profile-option-description");
    about.append(markdownFragment(profile.markdown_description));
    option.append(about);
  }
  return option;
}

export class ChatStart {
  /**
   * @param {{bar: HTMLElement, button: HTMLButtonElement, value: HTMLElement, list: HTMLElement,
   *          current: HTMLElement, description: HTMLElement, starters: HTMLElement}} dom
   * @param {{onStarter: (message: string) => void, onProfileChange: (name: string) => void,
   *          onError: (text: string) => void}} callbacks
   */
  constructor(dom, { onStarter, onProfileChange, onError }) {
    this.dom = dom;
    this.onError = onError;
    this.profiles = [];
    this.profile = "";
    this.starters = [];
    this.locked = false;
    this.loads = 0;
    this.picker = new ListboxMenu(dom.button, dom.list, { onChoose: onProfileChange });
    dom.starters.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-index]");
      const starter = button && this.starters[Number(button.dataset.index)];
      if (starter && !this.locked) onStarter(starter.message);
    });
  }

  /** Read what the app offers with `profile` chosen; returns the profile a chat asking for
   * it gets (the default when the app does not offer it), which the server gives it too. */
  async load(profile) {
    this.profile = profile;
    const ticket = ++this.loads; // only the latest read is shown (profiles switched quickly)
    try {
      const settings = await api.projectSettings(profile);
      if (ticket !== this.loads) return this.profile;
      this.profiles = settings.chatProfiles ?? [];
      this.starters = settings.starters ?? [];
      if (!this.locked) this.profile = settings.chatProfile ?? profile;
    } catch (error) {
      this.onError(interpolate(gettext("Could not read the chat's starters: %(error)s"), { error: error.message }));
    }
    this.render();
    return this.profile;
  }

  /** The chat had its first message: its profile is fixed, its starters are gone. */
  lock(profile = this.profile) {
    if (this.locked && profile === this.profile) return;
    this.locked = true;
    this.profile = profile;
    this.render();
  }

  render() {
    const { bar, button, value, current, description, starters } = this.dom;
    const chosen = this.profiles.find((p) => p.name === this.profile);
    // A picker when there is a choice to make; the chat's profile, read-only, once it is made.
    bar.hidden = this.locked ? !this.profile || this.profiles.length === 0 : this.profiles.length < 2;
    if (this.locked && this.picker.menu.isOpen) this.picker.menu.set(false);
    button.hidden = this.locked;
    current.hidden = !this.locked;
    current.replaceChildren(...profileLabel(chosen ?? { name: this.profile }));
    value.replaceChildren(...profileLabel(chosen ?? { name: this.profile }));
    this.picker.setOptions(this.profiles.map((p, index) => profileOption(p, index, p.name === this.profile)));
    description.replaceChildren(this.locked || !chosen ? "" : markdownFragment(chosen.markdown_description ?? ""));
    description.hidden = this.locked || !chosen?.markdown_description;

    starters.replaceChildren(
      ...this.starters.map((starter, index) => {
        const button = el("button", "starter");
        button.type = "button";
        button.dataset.index = String(index);
        // The page loads nothing from other origins (its CSP): only the server's own icons.
        if (isServerPath(starter.icon)) {
          const image = el("img", "starter-icon");
          image.src = starter.icon;
          image.alt = "";
          button.append(image);
        }
        button.append(el("span", "starter-label", starter.label));
        button.title = starter.message;
        return button;
      }),
    );
    starters.hidden = this.locked || this.starters.length === 0;
  }
}
