// Older steps of a long thread, read as the user scrolls up.
//
// A thread opens with its newest steps only (resume_thread with `resumeSteps`, or bootstrap
// with a limit), so a 5000-step thread opens as fast as a short one; the read says where it
// stopped (`omittedBeforeSeq`). Reaching the top of the conversation, or pressing the
// "Show earlier messages" button above it, reads the page before that (history with
// `before_seq`), keeps the line the user was reading where it was, and moves the cursor to
// what that page says (`previous`: more before it, or the start of the thread).

import { gettext } from "./i18n.js";

// How close to the top (px) a scroll must come to read the next older page.
const NEAR_TOP_PX = 200;

/** The cursor after a page of older steps: the seq to read before next, or null at the start. */
export function cursorAfter(page) {
  const first = page?.results?.[0];
  return page?.previous && first?.seq != null ? first.seq : null;
}

export class OlderSteps {
  /** `scroller`: the scrolling element; `list`: the transcript, the button goes above it;
   * `load(beforeSeq)`: a history page; `show(page)`: put its steps on the page. */
  constructor(scroller, list, { load, show, onError = () => {} }) {
    this.scroller = scroller;
    this.load = load;
    this.show = show;
    this.onError = onError;
    this.start = Infinity; // the smallest seq shown from a read, 0 once the start is shown
    this.before = null;
    this.loading = null;
    this.button = document.createElement("button");
    this.button.type = "button";
    this.button.className = "load-older";
    this.button.textContent = gettext("Show earlier messages");
    this.button.hidden = true;
    this.button.addEventListener("click", () => this.loadMore());
    list.before(this.button);
    scroller.addEventListener("scroll", () => {
      if (scroller.scrollTop < NEAR_TOP_PX) this.loadMore();
    }, { passive: true });
  }

  /** A read showed the steps from `seq` on (older ones exist before it), or from the start
   * of the thread (null). Reads can arrive in any order (bootstrap, resume_thread, pages
   * scrolled to): the cursor is the earliest start any of them reached. */
  setCursor(seq) {
    this.start = Math.min(this.start ?? Infinity, seq ?? 0);
    this.before = this.start > 0 && Number.isFinite(this.start) ? this.start : null;
    this.button.hidden = this.before == null;
    document.body.dataset.olderSteps = this.before == null ? "none" : "some";
  }

  /** Read the page before the cursor (once at a time); then, while the conversation does not
   * fill the screen (no scrolling can ask), the one before that. */
  loadMore() {
    if (this.before == null) return Promise.resolve();
    if (!this.loading) this.loading = this._load().finally(() => (this.loading = null));
    return this.loading;
  }

  async _load() {
    const { scroller } = this;
    const height = scroller.scrollHeight;
    const top = scroller.scrollTop;
    let page;
    try {
      page = await this.load(this.before);
    } catch (error) {
      this.onError(error);
      return;
    }
    this.show(page);
    // What the user was reading stays where it was: the new steps went in above it.
    scroller.scrollTop = top + (scroller.scrollHeight - height);
    this.setCursor(cursorAfter(page));
    this.fill();
  }

  /** While the conversation does not fill the screen (no scrolling can ask), read more. */
  fill() {
    if (this.before != null && this.scroller.scrollHeight <= this.scroller.clientHeight) {
      queueMicrotask(() => this.loadMore());
    }
  }
}
