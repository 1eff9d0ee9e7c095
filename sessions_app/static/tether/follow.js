// The message list follows the conversation while the user is at its end.
//
// Content grows after it is drawn (an image loads, a plot or a formula is drawn, a panel
// opens under the list): measuring "near the bottom" before each change misses those. So the
// page keeps one fact, whether the user is at the end, which only the user's own scrolling
// changes, and a ResizeObserver on the list and its content puts the view back at the end
// after any growth while that fact holds. While the user reads back, nothing moves and a
// "jump to latest" button offers the end.

import { gettext } from "./i18n.js";

// How far from the end (px) still counts as "at the end" (a rounding, a line being drawn).
const AT_END_PX = 48;

export class FollowView {
  /** `scroller`: the scrolling list; `contents`: the elements whose growth it follows;
   * `button`: the "jump to latest" button (hidden while the user is at the end);
   * `onJump()`: what follows a jump (the focus goes back to the composer). */
  constructor(scroller, contents, button, { onJump = () => {} } = {}) {
    this.scroller = scroller;
    this.button = button;
    this.atEnd = true;
    this.lastTop = scroller.scrollTop;
    button.setAttribute("aria-label", gettext("Jump to the latest message"));
    button.title = gettext("Jump to the latest message");
    button.addEventListener("click", () => {
      this.toEnd();
      onJump();
    });
    scroller.addEventListener("scroll", () => this.onScroll(), { passive: true });
    const observer = new ResizeObserver(() => this.follow());
    observer.observe(scroller);
    for (const node of contents) observer.observe(node);
    this.show();
  }

  distance() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight;
  }

  /** A scroll: the user's (or ours) says where they are. Growth below the view does not
   * scroll, so it cannot make the page think the user left the end. */
  onScroll() {
    const top = this.scroller.scrollTop;
    const up = top < this.lastTop;
    this.lastTop = top;
    if (this.distance() <= AT_END_PX) this.atEnd = true;
    else if (up) this.atEnd = false;
    this.show();
  }

  /** After a change: back to the end if the user is there. */
  follow() {
    if (this.atEnd) this.scroller.scrollTop = this.scroller.scrollHeight;
    this.lastTop = this.scroller.scrollTop;
    this.show();
  }

  /** Go to the end and follow from now on (the user sent something, a thread opened). */
  toEnd() {
    this.atEnd = true;
    this.follow();
  }

  show() {
    this.button.hidden = this.atEnd || this.distance() <= AT_END_PX;
  }
}
