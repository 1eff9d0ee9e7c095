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

/** Where `step` belongs in `entries` (an array of steps already in display order). */
export function insertionIndex(entries, step) {
  if (step.seq == null) return entries.length;
  const index = entries.findIndex((e) => (e.seq != null ? e.seq > step.seq : Boolean(e.streaming)));
  return index === -1 ? entries.length : index;
}

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
  }

  get size() {
    return this.entries.length;
  }

  get(id) {
    return this.entries.find((e) => e.id === String(id));
  }

  indexOf(id) {
    return this.entries.findIndex((e) => e.id === String(id));
  }

  /**
   * Add or replace a step. Returns `{step, index, changed}`: `index` is its position now,
   * `changed` false when an identical copy was already shown (nothing to redraw).
   */
  upsert(incoming) {
    const step = { ...incoming, id: String(incoming.id), streaming: Boolean(incoming.streaming) };
    const at = this.indexOf(step.id);
    if (at !== -1) {
      const current = this.entries[at];
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
