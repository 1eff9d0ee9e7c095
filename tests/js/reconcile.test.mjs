// reconcilePending: the one comparison between pending sends and the transcript.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { reconcilePending, transcribedIds } from "../../sessions_app/static/tether/reconcile.js";

const userStep = (id, acceptedIds, extra = {}) => ({
  id,
  type: "user_message",
  output: "text",
  metadata: acceptedIds ? { acceptedIds } : {},
  ...extra,
});

describe("transcribedIds", () => {
  it("names a user step's own id and the accepted ids it carries", () => {
    assert.deepEqual(transcribedIds(userStep("a", ["a", "b"])), ["a", "a", "b"]);
  });

  it("names nothing for a step that is not a user message", () => {
    assert.deepEqual(transcribedIds({ id: "x", type: "assistant_message", metadata: { acceptedIds: ["x"] } }), []);
    assert.deepEqual(transcribedIds(null), []);
  });

  it("reads a step without metadata", () => {
    assert.deepEqual(transcribedIds({ id: "a", type: "user_message" }), ["a"]);
  });
});

describe("reconcilePending", () => {
  it("keeps what the transcript does not carry yet, in order", () => {
    const pending = [{ id: "1", text: "one" }, { id: "2", text: "two" }];
    assert.deepEqual(reconcilePending(pending, []), pending);
  });

  it("retires a send once a user step carries its id", () => {
    const pending = [{ id: "1" }, { id: "2" }];
    assert.deepEqual(reconcilePending(pending, [userStep("1", ["1"])]), [{ id: "2" }]);
  });

  it("retires every send a merged turn carries, also those that are not the step's id", () => {
    const pending = [{ id: "1" }, { id: "2" }, { id: "3" }];
    const merged = userStep("2", ["2", "3"]);
    assert.deepEqual(reconcilePending(pending, [merged]), [{ id: "1" }]);
  });

  it("retires by the step id when a step has no acceptedIds (the hooks path)", () => {
    assert.deepEqual(reconcilePending([{ id: "1" }], [userStep("1")]), []);
  });

  it("ignores assistant steps, whatever their ids", () => {
    const pending = [{ id: "1" }];
    const reply = { id: "1", type: "assistant_message", metadata: { acceptedIds: ["1"] } };
    assert.deepEqual(reconcilePending(pending, [reply]), pending);
  });

  it("shows a send twice never: an optimistic copy and bootstrap's copy are one", () => {
    const local = { id: "1", text: "hi", state: "queued", files: [{ name: "a.png" }] };
    const fromBootstrap = { id: "1", text: "hi", acceptedAt: "2026-01-01T00:00:00Z", state: "pending" };
    const result = reconcilePending([local, fromBootstrap], []);
    assert.equal(result.length, 1);
    assert.equal(result[0].state, "queued"); // the first copy keeps its fields
    assert.equal(result[0].acceptedAt, "2026-01-01T00:00:00Z"); // later copies fill the gaps
    assert.deepEqual(result[0].files, [{ name: "a.png" }]);
  });

  it("drops a send bootstrap still lists when the transcript already has it", () => {
    // bootstrap reads pending before the transcript, so a send transcribed in between is in both.
    const pending = [{ id: "1", state: "pending" }];
    assert.deepEqual(reconcilePending(pending, [userStep("1", ["1"])]), []);
  });

  it("compares ids as strings", () => {
    assert.deepEqual(reconcilePending([{ id: 7 }], [userStep("7", ["7"])]), []);
  });

  it("skips malformed entries and takes any iterable of steps", () => {
    const steps = new Set([userStep("1", ["1"])]);
    assert.deepEqual(reconcilePending([null, { text: "no id" }, { id: "1" }, { id: "2" }], steps), [{ id: "2" }]);
  });

  it("does not modify its arguments", () => {
    const pending = [{ id: "1" }, { id: "1", text: "x" }];
    const entries = [userStep("2", ["2"])];
    const copy = structuredClone({ pending, entries });
    reconcilePending(pending, entries);
    assert.deepEqual({ pending, entries }, copy);
  });
});
