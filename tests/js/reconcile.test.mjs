// reconcilePending: the one comparison between pending sends and the transcript.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { pendingStatus, reconcilePending, transcribedIds } from "../../sessions_app/static/tether/reconcile.js";

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

describe("reconcilePending: a send's status", () => {
  const one = (copies, entries = []) => {
    const result = reconcilePending(copies, entries);
    assert.equal(result.length, 1);
    return result[0];
  };

  it("takes a later status of the same attempt when it is further along", () => {
    const sent = { id: "1", text: "hi", state: "sending", files: [{ name: "a.png" }] };
    const answered = one([sent, { id: "1", state: "queued" }]);
    assert.equal(answered.state, "queued");
    assert.equal(answered.text, "hi");
    assert.deepEqual(answered.files, [{ name: "a.png" }]);
    const failed = one([answered, { id: "1", state: "failed", reason: "stopped" }]);
    assert.deepEqual([failed.state, failed.reason, failed.text], ["failed", "stopped", "hi"]);
  });

  it("does not go back for a copy that arrives late by another path", () => {
    // chat-user-message on the thread's bus after the answer to the send...
    assert.equal(one([{ id: "1", state: "queued" }, { id: "1", state: "pending" }]).state, "queued");
    // ...or a bootstrap read made before the stop, after its message_failed.
    const failed = one([{ id: "1", state: "failed", reason: "stopped" }, { id: "1", state: "pending" }]);
    assert.deepEqual([failed.state, failed.reason], ["failed", "stopped"]);
  });

  it("starts over on Send again: a new attempt drops the old failure", () => {
    const failed = { id: "1", text: "hi", state: "failed", reason: "stopped" };
    const again = one([failed, { id: "1", state: "sending", attempt: 1 }]);
    assert.deepEqual(again, { id: "1", text: "hi", state: "sending", attempt: 1 });
    const localError = { id: "2", text: "x", state: "failed", error: "the photo upload failed (HTTP 500)" };
    assert.deepEqual(one([localError, { id: "2", state: "sending", attempt: 1 }]), {
      id: "2",
      text: "x",
      state: "sending",
      attempt: 1,
    });
  });

  it("applies what the server says to the latest attempt", () => {
    const again = { id: "1", text: "hi", state: "sending", attempt: 1 };
    assert.equal(one([again, { id: "1", state: "pending" }]).state, "pending");
    const failedAgain = one([again, { id: "1", state: "failed", reason: "engine" }]);
    assert.deepEqual([failedAgain.state, failedAgain.reason, failedAgain.attempt], ["failed", "engine", 1]);
    // A status of an older attempt does not undo the new one.
    assert.equal(one([again, { id: "1", state: "failed", reason: "stopped", attempt: 0 }]).state, "sending");
  });

  it("keeps the place of the first copy whichever copy's status wins", () => {
    const result = reconcilePending(
      [{ id: "1", state: "queued" }, { id: "2", state: "queued" }, { id: "1", state: "failed", reason: "stopped" }],
      [],
    );
    assert.deepEqual(
      result.map((p) => [p.id, p.state]),
      [
        ["1", "failed"],
        ["2", "queued"],
      ],
    );
  });

  it("retires a failed send once it was sent again and transcribed", () => {
    const again = { id: "1", state: "queued", attempt: 1 };
    const other = { id: "2", state: "failed", reason: "stopped" };
    assert.deepEqual(reconcilePending([again, other], [userStep("1", ["1"])]), [other]);
  });

  it("gives the same answer when run again on its own result", () => {
    const copies = [
      { id: "1", state: "sending", text: "a" },
      { id: "2", state: "failed", reason: "stopped", text: "b" },
      { id: "1", state: "queued" },
      { id: "2", state: "sending", attempt: 1 },
      { id: "2", state: "pending" },
    ];
    const once = reconcilePending(copies, []);
    assert.deepEqual(reconcilePending(once, []), once);
    assert.deepEqual(
      once.map((p) => [p.id, p.state, p.attempt]),
      [
        ["1", "queued", undefined],
        ["2", "pending", 1],
      ],
    );
  });
});

describe("pendingStatus", () => {
  it("labels a send on its way", () => {
    assert.deepEqual(pendingStatus({ state: "sending" }), { state: "sending", label: "Sending…", canRetry: false });
    assert.deepEqual(pendingStatus({ state: "pending" }), { state: "pending", label: "Pending", canRetry: false });
    assert.equal(pendingStatus({ state: "queued" }).label, "Queued: waits for the reply in progress");
  });

  it("reads a send without a known state as pending", () => {
    assert.equal(pendingStatus({}).state, "pending");
    assert.equal(pendingStatus({ state: "weird" }).state, "pending");
    assert.equal(pendingStatus(null).state, "pending");
  });

  it("says a failed send was not sent, why, and that it can be sent again", () => {
    assert.deepEqual(pendingStatus({ state: "failed", reason: "stopped" }), {
      state: "failed",
      label: "Not sent: stopped before it was answered",
      canRetry: true,
    });
    assert.equal(pendingStatus({ state: "failed", reason: "limit" }).label, "Not sent: refused by a limit");
    const engine = pendingStatus({ state: "failed", reason: "engine" });
    assert.equal(engine.label, "Not sent: the assistant could not take it");
    assert.equal(pendingStatus({ state: "failed", reason: "server" }).label, "Not sent: the server could not run it");
    assert.equal(pendingStatus({ state: "failed", reason: "" }).label, "Not sent");
    assert.equal(pendingStatus({ state: "failed", reason: "timeout" }).label, "Not sent: timeout");
    assert.equal(pendingStatus({ state: "failed", error: "no answer" }).label, "Not sent: no answer");
    assert.equal(pendingStatus({ state: "failed" }).canRetry, true);
  });
});
