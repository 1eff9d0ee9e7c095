// The page's transcript model: one entry per step id, in transcript order.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { insertionIndex, Transcript } from "../../sessions_app/static/tether/transcript.js";

const step = (id, seq, extra = {}) => ({ id, seq, type: "assistant_message", output: id, ...extra });
const ids = (t) => t.entries.map((e) => e.id);

describe("Transcript", () => {
  it("shows a step once however often it arrives", () => {
    const t = new Transcript();
    t.upsert(step("a", 1));
    const again = t.upsert(step("a", 1));
    assert.equal(again.changed, false);
    assert.deepEqual(ids(t), ["a"]);
  });

  it("orders by seq whatever the arrival order (bootstrap after live events)", () => {
    const t = new Transcript();
    t.upsert(step("c", 3));
    t.upsert(step("a", 1));
    t.upsert(step("b", 2));
    assert.deepEqual(ids(t), ["a", "b", "c"]);
  });

  it("keeps a reply still streaming after the history read in later", () => {
    const t = new Transcript();
    t.appendToken({ id: "r", token: "Ech" });
    t.upsert(step("u", 5, { type: "user_message" }));
    t.upsert(step("g", 4));
    assert.deepEqual(ids(t), ["g", "u", "r"]);
  });

  it("puts a completed step without seq (sent before the thread existed) first come, first shown", () => {
    const t = new Transcript();
    t.upsert(step("greeting", null));
    t.upsert(step("u", 2, { type: "user_message" }));
    assert.deepEqual(ids(t), ["greeting", "u"]);
    t.upsert(step("greeting", 1)); // the same step, read back with its seq
    assert.deepEqual(ids(t), ["greeting", "u"]);
  });

  it("grows a streamed reply token by token and completes it once", () => {
    const t = new Transcript();
    t.upsert({ id: "r", type: "assistant_message", output: "", streaming: true });
    t.appendToken({ id: "r", token: "Echo " });
    t.appendToken({ id: "r", token: "#1" });
    assert.equal(t.get("r").output, "Echo #1");
    t.upsert(step("r", 2, { output: "Echo #1: hi" }));
    assert.equal(t.get("r").streaming, false);
    assert.equal(t.appendToken({ id: "r", token: "late" }), null); // a late token is ignored
    assert.equal(t.get("r").output, "Echo #1: hi");
    assert.equal(t.size, 1);
  });

  it("keeps a reply cut by a stop, and takes the server's interrupted copy as a change", () => {
    const t = new Transcript();
    t.appendToken({ id: "r", token: "Echo #1: part" });
    t.get("r").streaming = false; // the page's task_end: no final version will stream in
    // The server persisted what streamed, marked interrupted: only the metadata differs.
    const stopped = t.upsert(step("r", 3, { output: "Echo #1: part", metadata: { interrupted: true } }));
    assert.equal(stopped.changed, true);
    assert.equal(t.get("r").output, "Echo #1: part");
    assert.equal(t.get("r").metadata.interrupted, true);
    assert.equal(t.upsert(step("r", 3, { output: "Echo #1: part", metadata: { interrupted: true } })).changed, false);
    assert.equal(t.size, 1);
  });

  it("replaces the text of a sequence token", () => {
    const t = new Transcript();
    t.appendToken({ id: "r", token: "a" });
    t.appendToken({ id: "r", token: "whole", isSequence: true });
    assert.equal(t.get("r").output, "whole");
  });

  it("does not turn a complete step back into a streaming one", () => {
    const t = new Transcript();
    t.upsert(step("r", 1, { output: "done" }));
    t.upsert({ id: "r", type: "assistant_message", output: "", streaming: true });
    assert.equal(t.get("r").streaming, false);
    assert.equal(t.get("r").output, "done");
  });

  it("keeps the seq it knows when an update comes without one", () => {
    const t = new Transcript();
    t.upsert(step("a", 1));
    t.upsert(step("b", 2));
    t.upsert({ id: "a", type: "assistant_message", output: "edited", seq: null });
    assert.deepEqual(ids(t), ["a", "b"]);
    assert.equal(t.get("a").output, "edited");
  });

  it("removes a step and reports the largest seq", () => {
    const t = new Transcript();
    t.upsert(step("a", 1));
    t.upsert(step("b", 7));
    assert.equal(t.maxSeq(), 7);
    assert.equal(t.remove("b"), true);
    assert.equal(t.remove("b"), false);
    assert.equal(t.maxSeq(), 1);
    assert.equal(new Transcript().maxSeq(), 0);
  });

  it("shows a user step once under the client's id live and its own id when read", () => {
    // Live, the turn shows its user step under the id the client chose ("c1"); a history
    // read (a reconnect's catch-up, resume_thread) has it under its key ("k1"). One entry.
    const t = new Transcript();
    const sends = { acceptedIds: ["c1", "c2"] };
    t.upsert(step("c1", 4, { type: "user_message", output: "hi", metadata: sends }));
    const read = t.upsert(step("k1", 4, { type: "user_message", output: "hi", metadata: sends }));
    assert.equal(read.changed, false);
    assert.deepEqual(ids(t), ["c1"]);
    // A change read under the key lands on the entry, which keeps the id the page drew.
    t.upsert(step("k1", 4, { type: "user_message", output: "edited", metadata: sends }));
    assert.deepEqual(ids(t), ["c1"]);
    assert.equal(t.get("c1").output, "edited");
    // delete_message names the key: the entry is found through the sends it shares.
    assert.equal(t.idOf({ id: "k1", type: "user_message", metadata: { acceptedIds: ["c2"] } }), "c1");
    assert.equal(t.idOf({ id: "k9", type: "assistant_message", metadata: sends }), null);
  });

  it("keeps a nested step's parent the entry of its user step, by whichever id it is named", () => {
    const user = (id) => step(id, 1, { type: "user_message", metadata: { acceptedIds: ["c1"] } });
    // Read first (a reload mid-turn), then live steps naming the client's id.
    const read = new Transcript();
    read.upsert(user("k1"));
    read.upsert(step("s1", 2, { type: "tool", parentId: "k1" }));
    read.upsert(step("s2", 3, { type: "tool", parentId: "c1" }));
    assert.deepEqual(
      read.entries.map((e) => [e.id, e.parentId ?? null]),
      [["k1", null], ["s1", "k1"], ["s2", "k1"]],
    );
    // Live first, then the history read naming the key.
    const live = new Transcript();
    live.upsert(user("c1"));
    live.upsert(step("s1", 2, { type: "tool", parentId: "c1" }));
    live.upsert(user("k1"));
    live.upsert(step("s1", 2, { type: "tool", parentId: "k1", output: "done" }));
    live.upsert(step("s2", 3, { type: "tool", parentId: "k1" }));
    assert.deepEqual(
      live.entries.map((e) => [e.id, e.parentId ?? null]),
      [["c1", null], ["s1", "c1"], ["s2", "c1"]],
    );
    assert.equal(live.get("k1").id, "c1");
  });
});

describe("insertionIndex", () => {
  it("appends steps without seq and places the others by seq", () => {
    const entries = [step("a", 1), step("c", 3), { id: "s", streaming: true }];
    assert.equal(insertionIndex(entries, step("x", null)), 3);
    assert.equal(insertionIndex(entries, step("b", 2)), 1);
    assert.equal(insertionIndex(entries, step("d", 4)), 2);
  });
});
