// Steps in the page's transcript model: a step (not a message) is open to stream tokens until
// it has an end, whether or not it was shown before it started streaming.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Transcript } from "../../sessions_app/static/tether/transcript.js";

const tool = (extra = {}) => ({
  id: "t",
  seq: 2,
  type: "tool",
  name: "search",
  input: "",
  output: "",
  start: "2026-01-01T00:00:00Z",
  end: null,
  ...extra,
});

describe("steps in the transcript", () => {
  it("streams into a step shown when it opened, then takes its end", () => {
    const t = new Transcript();
    t.upsert(tool());
    const started = t.upsert({ ...tool({ output: "first " }), streaming: true });
    assert.equal(started.changed, true);
    assert.equal(t.get("t").streaming, true);
    assert.equal(t.get("t").output, "first ");
    t.appendToken({ id: "t", token: "second" });
    assert.equal(t.get("t").output, "first second");
    const done = t.upsert(tool({ output: "first second", end: "2026-01-01T00:00:01Z" }));
    assert.equal(done.changed, true);
    assert.equal(t.get("t").streaming, false);
    // Finished: late tokens and a late stream_start change nothing.
    assert.equal(t.appendToken({ id: "t", token: "late" }), null);
    assert.equal(t.upsert({ ...tool({ output: "x" }), streaming: true }).changed, false);
    assert.equal(t.get("t").output, "first second");
  });

  it("puts input tokens into the input and takes an open step's tokens without a stream_start", () => {
    const t = new Transcript();
    t.upsert(tool());
    t.appendToken({ id: "t", token: "{\"q\":", isInput: true });
    t.appendToken({ id: "t", token: " 1}", isInput: true });
    t.appendToken({ id: "t", token: "out" });
    assert.equal(t.get("t").input, '{"q": 1}');
    assert.equal(t.get("t").output, "out");
    t.appendToken({ id: "t", token: "replaced", isSequence: true });
    assert.equal(t.get("t").output, "replaced");
  });

  it("redraws a step whose end or input changed even when its output did not", () => {
    const t = new Transcript();
    t.upsert(tool());
    assert.equal(t.upsert(tool({ input: "{}" })).changed, true);
    assert.equal(t.upsert(tool({ input: "{}", end: "2026-01-01T00:00:01Z" })).changed, true);
    assert.equal(t.upsert(tool({ input: "{}", end: "2026-01-01T00:00:01Z" })).changed, false);
  });

  it("keeps a finished message closed to a late stream_start, as before", () => {
    const t = new Transcript();
    t.upsert({ id: "m", seq: 1, type: "assistant_message", output: "done", end: null });
    assert.equal(t.upsert({ id: "m", seq: 1, type: "assistant_message", output: "x", streaming: true }).changed, false);
    assert.equal(t.appendToken({ id: "m", token: "late" }), null);
  });
});
