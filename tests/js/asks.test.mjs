// The file picker of a file ask: Chainlit's `accept` (MIME types, or {type: [extensions]}) as
// the `accept` attribute of an <input type="file">.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { acceptAttribute } from "../../sessions_app/static/tether/asks.js";

describe("acceptAttribute", () => {
  it("joins a list of MIME types", () => {
    assert.equal(acceptAttribute(["image/png", "image/*"]), "image/png,image/*");
  });

  it("lists each type of a dict with its extensions", () => {
    assert.equal(acceptAttribute({ "text/plain": [".txt", ".py"], "application/pdf": [] }), "text/plain,.txt,.py,application/pdf");
  });

  it("accepts anything when the ask names nothing", () => {
    assert.equal(acceptAttribute(undefined), "");
    assert.equal(acceptAttribute([]), "");
  });
});
