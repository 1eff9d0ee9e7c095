// The one place where the two records of a message meet (DESIGN.md section 6).
//
// A send is "pending" from the moment the user presses Enter until a transcript user step
// carries its id. Pending copies come from three places: the optimistic copy this tab made,
// bootstrap's `pending` after a reload, and `chat-user-message` events for sends made
// elsewhere. The server never compares them with the transcript; this function does.

/** The message ids a transcript step transcribes: a user step's own id and its acceptedIds. */
export function transcribedIds(step) {
  if (!step || step.type !== "user_message") return [];
  const accepted = Array.isArray(step.metadata?.acceptedIds) ? step.metadata.acceptedIds : [];
  return [step.id, ...accepted].filter(Boolean).map(String);
}

/**
 * The pending messages the transcript has not caught up with yet.
 *
 * @param {Array<{id: string}>} pending  pending copies, in display order; the same id may
 *   appear more than once (an optimistic copy and bootstrap's copy of one send): the first
 *   keeps its place and fields, later copies only fill fields it lacks.
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
    byId.set(id, seen ? { ...item, ...seen } : { ...item, id });
  }
  return [...byId.values()];
}
