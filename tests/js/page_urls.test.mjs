// Icon URLs (page_urls.js): only paths on this server, as the server's own check reads them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { isServerPath } from "../../sessions_app/static/tether/page_urls.js";

describe("isServerPath", () => {
  it("takes paths on this server", () => {
    for (const url of ["/static/hi.svg", "/", "/a?x=//y", "/ü.png"]) assert.equal(isServerPath(url), true, url);
  });

  it("refuses other origins however they are written", () => {
    for (const url of ["//evil.example/x", "/\\evil.example/x", "/\t/evil.example/x", "/\n/evil.example", " //x"]) {
      assert.equal(isServerPath(url), false, JSON.stringify(url));
    }
  });

  it("refuses URLs with a scheme, relative paths and what is not a string", () => {
    for (const url of ["https://example.com/x.png", "javascript:alert(1)", "x.png", "", null, undefined, 7]) {
      assert.equal(isServerPath(url), false, String(url));
    }
  });
});
