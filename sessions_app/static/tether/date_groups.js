// The sidebar's date groups (Today, Yesterday, Previous 7 days, Previous 30 days, then one
// per month), as Chainlit and other chat apps group a user's chats. Days are calendar days in
// the browser's time zone, which is the user's: a chat updated at 23:30 is "Yesterday" at
// 00:10, however few hours ago that was.

import { gettext } from "./i18n.js";

const DAY_MS = 24 * 60 * 60 * 1000;

/** Local midnight of `date`, as a day number that daylight saving cannot shift. */
function dayNumber(date) {
  return Math.round(Date.UTC(date.getFullYear(), date.getMonth(), date.getDate()) / DAY_MS);
}

/**
 * The group of a chat last updated at `when` (an ISO string or a Date), seen at `now`:
 * `{key, label}`; `key` is the same for every chat of one group. `locale` names the month
 * (the page's language).
 */
export function dateGroup(when, now = new Date(), locale = undefined) {
  const date = when instanceof Date ? when : new Date(when);
  if (Number.isNaN(date.getTime())) return { key: "today", label: gettext("Today") };
  const days = dayNumber(now) - dayNumber(date);
  if (days <= 0) return { key: "today", label: gettext("Today") }; // or a clock a little ahead
  if (days === 1) return { key: "yesterday", label: gettext("Yesterday") };
  if (days <= 7) return { key: "week", label: gettext("Previous 7 days") };
  if (days <= 30) return { key: "month", label: gettext("Previous 30 days") };
  const label = new Intl.DateTimeFormat(locale, { month: "long", year: "numeric" }).format(date);
  return { key: `${date.getFullYear()}-${date.getMonth() + 1}`, label };
}

/** Threads (newest first) split into their date groups, in order: `[{key, label, threads}]`. */
export function groupByDate(threads, now = new Date(), locale = undefined) {
  const groups = [];
  for (const thread of threads) {
    const { key, label } = dateGroup(thread.updatedAt ?? thread.createdAt, now, locale);
    const last = groups.at(-1);
    if (last?.key === key) last.threads.push(thread);
    else groups.push({ key, label, threads: [thread] });
  }
  return groups;
}
