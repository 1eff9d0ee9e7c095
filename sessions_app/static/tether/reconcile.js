// The one place where the two records of a message meet (DESIGN.md section 6), and the one
// place that decides what a send not transcribed yet shows.
//
// A send is "pending" from the moment the user presses Enter until a transcript user step
// carries its id. Copies of it come from several places: the optimistic copy this tab made
// (and what the server answered to it), bootstrap's `pending` and `failed` after a reload,
// `chat-user-message` events for sends made elsewhere, and `message_failed` events. The server
// never compares them with the transcript; reconcilePending does, and it also merges the copies
// of one send into the one entry the page shows.

import { gettext, interpolate } from "./i18n.js";

/** The message ids a transcript step transcribes: a user step's own id and its acceptedIds. */
export function transcribedIds(step) {
  if (!step || step.type !== "user_message") return [];
  const accepted = Array.isArray(step.metadata?.acceptedIds) ? step.metadata.acceptedIds : [];
  return [step.id, ...accepted].filter(Boolean).map(String);
}

// Where one attempt at a send can be, in the order it moves: the page is sending it, the
// server accepted it, it waits behind the reply in progress, or it failed (the server's
// `reason`: stopped, limit, engine, server; or this page's `error`: an upload failed, the
// server refused it). "Send again" starts a new attempt (`attempt` + 1).
const RANK = { sending: 0, pending: 1, queued: 2, failed: 3 };
const STATUS_FIELDS = ["state", "reason", "error"];

const attemptOf = (item, fallback) => (Number.isInteger(item.attempt) ? item.attempt : fallback);
const rankOf = (item) => RANK[item.state] ?? RANK.pending;

/**
 * Two copies of one send as one entry. Its place and fields are the first copy's, later copies
 * only fill fields it lacks; its status (state, reason, error) is the latest attempt's, and
 * within one attempt the furthest along: copies arrive by different paths (an event on the
 * thread's bus may come after the answer to the send, or a bootstrap read made before a
 * stop after the `message_failed` of that stop), so arrival order does not say which is newer.
 * A copy without an attempt number (what the server says) is about the latest attempt.
 */
function merge(seen, item) {
  const seenAttempt = attemptOf(seen, 0);
  const attempt = attemptOf(item, seenAttempt);
  const later = attempt > seenAttempt || (attempt === seenAttempt && rankOf(item) > rankOf(seen));
  const merged = { ...item, ...seen };
  const status = later ? item : seen;
  for (const field of STATUS_FIELDS) {
    if (status[field] === undefined) delete merged[field];
    else merged[field] = status[field];
  }
  if (Math.max(attempt, seenAttempt) > 0) merged.attempt = Math.max(attempt, seenAttempt);
  return merged;
}

/**
 * The pending messages the transcript has not caught up with yet.
 *
 * @param {Array<{id: string}>} pending  pending copies, in display order; the same id may
 *   appear more than once (an optimistic copy, bootstrap's copy, a status change): they are
 *   merged into one entry (see `merge`) at the first copy's place.
 * @param {Iterable<object>} entries  transcript steps (StepDicts), in any order.
 * @returns {Array<object>} a new array, one entry per id still owed, in the order given.
 */
export function reconcilePending(pending, entries) {
  const transcribed = new Set();
  for (const step of entries) {
    for (const id of transcribedIds(step)) transcribed.add(id);
  }
  const byId = new Map();
  for (const item of pending) {
    if (!item || item.id == null) continue;
    const id = String(item.id);
    if (transcribed.has(id)) continue;
    const seen = byId.get(id);
    byId.set(id, seen ? merge(seen, { ...item, id }) : { ...item, id });
  }
  return [...byId.values()];
}

const LABELS = {
  sending: gettext("Sending…"),
  pending: gettext("Pending"),
  queued: gettext("Queued: waits for the reply in progress"),
};

// Why the server did not answer a send (AcceptedMessage.Failure), as the page says it.
const FAILURES = {
  stopped: gettext("stopped before it was answered"),
  limit: gettext("refused by a limit"),
  engine: gettext("the assistant could not take it"),
  server: gettext("the server could not run it"),
};

/**
 * What a pending entry shows: `{state, label, canRetry}`. A failed send can be sent again;
 * `label` says why it failed when that is known.
 */
export function pendingStatus(item) {
  const state = item?.state in RANK ? item.state : "pending";
  if (state !== "failed") return { state, label: LABELS[state], canRetry: false };
  const why = item.error || FAILURES[item.reason] || item.reason || "";
  return { state, label: why ? interpolate(gettext("Not sent: %(why)s"), { why }) : gettext("Not sent"), canRetry: true };
}
