// The transcript as the page knows it: steps by id, in display order. No DOM here.
//
// Steps reach the page from several sources that may overlap and arrive in any order: the
// bootstrap read, resume_thread, live new_message / update_message events, and the history
// read that catches up after a reconnect. Every one goes through upsert(), keyed by step id,
// so a step is shown once however many times it arrives.
//
// Order: a step that has a `seq` goes before the first step with a larger seq and before a
// reply still streaming (which has no seq until it completes); a step without a seq (a
// streaming reply, a message sent before the thread existed) goes at the end.
//
// A user step comes under two ids: live, under the id the sending client chose (Chainlit's
// client drew the message under it), in transcript reads under its own (the send's key). Both
// list the client's ids in `metadata.acceptedIds`, so a user step sharing one with an entry
// is that entry, and keeps the id the page first knew it by. The steps nested in it name it
// as their parent the same two ways; their `parentId` is kept as the id of its entry.

/** Where `step` belongs in `entries` (an array of steps already in display order). */
export function insertionIndex(entries, step) {
  if (step.seq == null) return entries.length;
  const index = entries.findIndex((e) => (e.seq != null ? e.seq > step.seq : Boolean(e.streaming)));
  return index === -1 ? entries.length : index;
}

/** The client ids of the sends a user step transcribes (none for other steps). */
const sendIds = (step) =>
  step?.type === "user_message" && Array.isArray(step.metadata?.acceptedIds)
    ? step.metadata.acceptedIds.map(String)
    : [];

// A step (a tool call, not a message) takes stream tokens until it has an end.
const openStep = (step) => !String(step.type ?? "").includes("message") && step.end == null;

function sameStep(a, b) {
  return (
    a.output === b.output &&
    (a.input ?? "") === (b.input ?? "") &&
    (a.end ?? null) === (b.end ?? null) &&
    a.seq === b.seq &&
    Boolean(a.streaming) === Boolean(b.streaming) &&
    Boolean(a.isError) === Boolean(b.isError) &&
    a.name === b.name &&
    JSON.stringify(a.content ?? []) === JSON.stringify(b.content ?? []) &&
    JSON.stringify(a.metadata ?? {}) === JSON.stringify(b.metadata ?? {})
  );
}

export class Transcript {
  constructor() {
    this.entries = [];
    this.aliases = new Map(); // a user step's other id -> the id of its entry
  }

  /** The id of the entry `id` names: its own, a user step's other id, or one of its sends. */
  canonical(id) {
    const key = String(id);
    if (this.entries.some((e) => e.id === key)) return key;
    if (this.aliases.has(key)) return this.aliases.get(key);
    return this.entries.find((e) => sendIds(e).includes(key))?.id ?? key;
  }

  get size() {
    return this.entries.length;
  }

  get(id) {
    const key = this.canonical(id);
    return this.entries.find((e) => e.id === key);
  }

  indexOf(id) {
    const key = this.canonical(id);
    return this.entries.findIndex((e) => e.id === key);
  }

  /** Where the entry for `step` is: the one with its id, or the user step sharing a send. */
  indexOfStep(step) {
    const at = this.indexOf(step.id);
    const sends = sendIds(step);
    if (at !== -1 || sends.length === 0) return at;
    return this.entries.findIndex((e) => sendIds(e).some((id) => sends.includes(id)));
  }

  /** The id the page shows `step` under (see `indexOfStep`), or null when it has no entry. */
  idOf(step) {
    const at = this.indexOfStep(step);
    return at === -1 ? null : this.entries[at].id;
  }

  /**
   * Add or replace a step. Returns `{step, index, changed}`: `index` is its position now,
   * `changed` false when an identical copy was already shown (nothing to redraw).
   */
  upsert(incoming) {
    const step = { ...incoming, id: String(incoming.id), streaming: Boolean(incoming.streaming) };
    if (step.parentId != null) step.parentId = this.canonical(step.parentId);
    const at = this.indexOfStep(step);
    if (at !== -1) {
      const current = this.entries[at];
      if (step.id !== current.id) this.aliases.set(step.id, current.id);
      step.id = current.id; // a user step read under its own id after it was shown live
      // A repeated stream_start changes nothing, and a complete step is never turned back
      // into a streaming one by a late one.
      // A step shown when it opened starts streaming later: its stream_start carries the text
      // so far.
      if (step.streaming && !(openStep(current) && !current.streaming)) {
        return { step: current, index: at, changed: false };
      }
      if (step.seq == null && current.seq != null) step.seq = current.seq;
      if (sameStep(current, step)) return { step: current, index: at, changed: false };
      this.entries.splice(at, 1);
    }
    const index = insertionIndex(this.entries, step);
    this.entries.splice(index, 0, step);
    return { step, index, changed: true };
  }

  remove(id) {
    const at = this.indexOf(id);
    if (at === -1) return false;
    this.entries.splice(at, 1);
    return true;
  }

  /**
   * A stream token. A token for a step this page has not seen (the page was reloaded or
   * reconnected mid-reply) opens it; a token for a step that already completed is ignored.
   */
  appendToken({ id, token, isSequence, isInput }) {
    let step = this.get(id);
    if (step && !step.streaming && !openStep(step)) return null;
    if (!step) {
      step = this.upsert({ id, type: "assistant_message", name: "assistant", output: "", streaming: true }).step;
    }
    step.streaming = true;
    const field = isInput ? "input" : "output";
    step[field] = isSequence ? String(token ?? "") : (step[field] ?? "") + String(token ?? "");
    return step;
  }

  /** The largest seq shown: what a catch-up read asks for "after". */
  maxSeq() {
    return this.entries.reduce((max, e) => (e.seq != null && e.seq > max ? e.seq : max), 0);
  }
}
