// photosOf: which photos a transcript entry shows, and from where.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { mediaUrl } from "../../sessions_app/static/tether/api.js";
import { photosOf } from "../../sessions_app/static/tether/photos.js";

describe("photosOf", () => {
  it("shows a stripped photo through its media reference", () => {
    const ref = "6a0c1d2e-0000-4000-8000-000000000001/7b1d2e3f-0000-4000-8000-000000000002/0";
    assert.deepEqual(photosOf([{ type: "image", imageRef: ref }, { type: "text", text: "hi" }]), [
      { src: `/api/session-media/${ref}` },
    ]);
  });

  it("encodes each segment of a reference", () => {
    assert.equal(mediaUrl("a b/c?d/1"), "/api/session-media/a%20b/c%3Fd/1");
  });

  it("shows an inline photo of a live event from its data, for allowed types only", () => {
    const png = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
    const svg = { type: "image", source: { type: "base64", media_type: "image/svg+xml", data: "PHN2Zz4=" } };
    assert.deepEqual(photosOf([png, svg]), [{ src: "data:image/png;base64,iVBORw0KGgo=" }, { missing: true }]);
  });

  it("says a photo is missing when its upload failed or its payload is not base64", () => {
    const empty = { type: "image", source: { type: "base64", media_type: "image/png", data: "" } };
    const marker = { type: "image", source: { type: "base64", media_type: "image/png", data: "~stripped~" } };
    const text = { type: "text", text: "[image not displayed]" };
    assert.deepEqual(photosOf([empty, marker, text]), [{ missing: true }, { missing: true }, { missing: true }]);
  });

  it("reads anything else as no photos", () => {
    assert.deepEqual(photosOf(undefined), []);
    assert.deepEqual(photosOf([null, "x", { type: "tool_use" }]), []);
  });
});
