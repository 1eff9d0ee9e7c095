// The sidebar: the user's threads, newest first, in date groups (date_groups.js), with
// search, rename and delete. #thread-list holds one <li> per group: its heading and a list of
// its threads (.thread-item), so a screen reader hears "Today, list, 3 items".

import { confirmInPage } from "./confirm.js";
import { groupByDate } from "./date_groups.js";
import { deleteThread, fetchUrl, listThreads, renameThread } from "./api.js";
import { gettext, interpolate } from "./i18n.js";
import { el, icon } from "./render.js";

const SEARCH_DELAY_MS = 250;

export class Sidebar {
  /**
   * @param {HTMLElement} root  the <aside> holding #thread-list, #thread-search, #more-threads
   * @param {{currentId: string|null, onError: (text: string) => void, onDeletedCurrent: () => void}} options
   */
  constructor(root, { currentId, onError, onDeletedCurrent }) {
    this.root = root;
    this.list = root.querySelector("#thread-list");
    this.search = root.querySelector("#thread-search");
    this.more = root.querySelector("#more-threads");
    this.empty = root.querySelector("#threads-empty");
    this.currentId = currentId;
    this.onError = onError;
    this.onDeletedCurrent = onDeletedCurrent;
    this.latest = Promise.resolve(undefined); // the newest read of the list
    this.next = null;
    this.threads = []; // what the list shows, newest first (the groups are drawn from it)
    this.generation = 0; // answers to an older search are dropped
    let timer = null;
    this.search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.load(), SEARCH_DELAY_MS);
    });
    this.search.form?.addEventListener("submit", (event) => {
      event.preventDefault();
      clearTimeout(timer);
      this.load();
    });
    this.more.addEventListener("click", () => this.loadMore());
  }

  /** (Re)read the list; answers the threads shown (undefined when it failed). A read overtaken
   * by a newer one answers what the newer one shows, so a caller looking for a thread it just
   * created finds it whichever read lands last. */
  load() {
    const generation = ++this.generation;
    this.latest = this.read(generation);
    return this.latest;
  }

  async read(generation) {
    this.root.setAttribute("aria-busy", "true");
    try {
      const page = await listThreads({ search: this.search.value });
      if (generation !== this.generation) return this.latest;
      this.threads = page.results;
      this.draw();
      this.setNext(page.next);
      return page.results;
    } catch (error) {
      if (generation === this.generation) this.onError(interpolate(gettext("Could not load your chats: %(error)s"), { error: error.message }));
    } finally {
      if (generation === this.generation) this.root.setAttribute("aria-busy", "false");
    }
  }

  async loadMore() {
    if (!this.next) return;
    const generation = this.generation;
    try {
      const page = await fetchUrl(this.next);
      if (generation !== this.generation) return;
      const known = new Set(this.threads.map((t) => t.id));
      this.threads = [...this.threads, ...page.results.filter((t) => !known.has(t.id))];
      this.draw();
      this.setNext(page.next);
    } catch (error) {
      this.onError(interpolate(gettext("Could not load more chats: %(error)s"), { error: error.message }));
    }
  }

  /** The threads' items, under a heading per date group (in the user's time zone). */
  draw() {
    // The focus stays on the same control of the same chat when the list is drawn again.
    const focused = this.list.contains(document.activeElement) ? document.activeElement : null;
    const focusedId = focused?.closest(".thread-item")?.dataset.threadId;
    const focusedClass = focused?.classList[focused.classList.length - 1];
    const groups = groupByDate(this.threads, new Date(), document.documentElement.lang || undefined);
    this.list.replaceChildren(
      ...groups.map((group) => {
        const section = el("li", "thread-group");
        section.dataset.group = group.key;
        const heading = el("h2", "thread-group-title", group.label);
        heading.id = `thread-group-${group.key}`;
        const list = el("ul", "thread-group-items");
        list.setAttribute("aria-labelledby", heading.id);
        list.append(...group.threads.map((t) => this.item(t)));
        section.append(heading, list);
        return section;
      }),
    );
    if (focusedId) {
      const item = [...this.items()].find((li) => li.dataset.threadId === focusedId);
      (item?.querySelector(`.${focusedClass}`) ?? item?.querySelector("a"))?.focus();
    }
  }

  items() {
    return this.list.querySelectorAll(".thread-item");
  }

  setNext(next) {
    this.next = next;
    this.more.hidden = !next;
    this.empty.hidden = this.items().length > 0;
    this.empty.textContent = this.search.value.trim() ? gettext("No chats match.") : gettext("No chats yet.");
  }

  setCurrent(id) {
    this.currentId = id;
    for (const li of this.items()) {
      const link = li.querySelector("a");
      if (li.dataset.threadId === id) link?.setAttribute("aria-current", "page");
      else link?.removeAttribute("aria-current");
    }
  }

  item(thread) {
    const li = el("li", "thread-item");
    li.dataset.threadId = thread.id;
    const name = thread.name || gettext("Untitled chat");
    const link = el("a", "thread-link", name);
    link.href = `/thread/${encodeURIComponent(thread.id)}/`;
    link.title = name;
    if (thread.id === this.currentId) link.setAttribute("aria-current", "page");
    const actions = el("div", "thread-actions");
    const rename = el("button", "icon-button rename");
    rename.append(icon("pencil"));
    rename.type = "button";
    rename.setAttribute("aria-label", interpolate(gettext("Rename chat “%(name)s”"), { name }));
    rename.title = gettext("Rename");
    rename.addEventListener("click", () => this.startRename(li, thread));
    const remove = el("button", "icon-button delete");
    remove.append(icon("trash"));
    remove.type = "button";
    remove.setAttribute("aria-label", interpolate(gettext("Delete chat “%(name)s”"), { name }));
    remove.title = gettext("Delete");
    remove.addEventListener("click", () => this.remove(li, thread));
    actions.append(rename, remove);
    li.append(link, actions);
    return li;
  }

  startRename(li, thread) {
    const form = el("form", "rename-form");
    const input = el("input");
    input.value = thread.name || "";
    input.maxLength = 255;
    input.required = true;
    input.setAttribute("aria-label", gettext("New name of the chat"));
    form.append(input);
    const original = [...li.children];
    li.replaceChildren(form);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const name = input.value.trim();
      if (save && name && name !== thread.name) {
        try {
          const updated = await renameThread(thread.id, name);
          this.threads = this.threads.map((t) => (t.id === updated.id ? updated : t));
          const fresh = this.item(updated);
          li.replaceWith(fresh);
          fresh.querySelector(".rename").focus();
          if (thread.id === this.currentId) document.dispatchEvent(new CustomEvent("tether:renamed", { detail: updated }));
          return;
        } catch (error) {
          this.onError(interpolate(gettext("Could not rename the chat: %(error)s"), { error: error.message }));
        }
      }
      li.replaceChildren(...original);
      li.querySelector(".rename").focus();
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      finish(true);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
  }

  async remove(li, thread) {
    const question = gettext("Delete the chat “%(name)s”? This cannot be undone.");
    if (!(await confirmInPage(interpolate(question, { name: thread.name || gettext("Untitled chat") })))) return;
    try {
      await deleteThread(thread.id);
    } catch (error) {
      this.onError(interpolate(gettext("Could not delete the chat: %(error)s"), { error: error.message }));
      return;
    }
    const all = [...this.items()];
    const at = all.indexOf(li);
    const next = all[at + 1] ?? all[at - 1];
    this.threads = this.threads.filter((t) => t.id !== thread.id);
    const group = li.closest(".thread-group");
    li.remove();
    if (group && !group.querySelector(".thread-item")) group.remove(); // no empty heading
    this.empty.hidden = this.items().length > 0;
    if (thread.id === this.currentId) this.onDeletedCurrent();
    else (next?.querySelector("a") ?? this.search).focus();
  }
}
