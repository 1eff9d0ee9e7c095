// Older steps read as the user scrolls up: the cursor a page leaves, and the earliest start
// of reads that arrive in any order.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { cursorAfter, OlderSteps } from "../../sessions_app/static/tether/older.js";

const node = () => ({ listeners: {}, addEventListener(n, f) { this.listeners[n] = f; }, before() {} });

async function withDocument(run) {
  const saved = globalThis.document;
  globalThis.document = {
    body: { dataset: {} },
    createElement: () => ({ ...node(), hidden: false, textContent: "" }),
  };
  try {
    return await run();
  } finally {
    globalThis.document = saved;
  }
}

function make(pages) {
  const scroller = { ...node(), scrollTop: 0, scrollHeight: 1000, clientHeight: 500 };
  const asked = [];
  const shown = [];
  const older = new OlderSteps(scroller, node(), {
    load: async (before) => {
      asked.push(before);
      return pages[before];
    },
    show: (page) => {
      shown.push(...page.results.map((s) => s.seq));
      scroller.scrollHeight += 100 * page.results.length;
    },
  });
  return { older, scroller, asked, shown };
}

describe("cursorAfter", () => {
  it("is the first seq of a page that has older ones, else null", () => {
    assert.equal(cursorAfter({ results: [{ seq: 11 }, { seq: 12 }], previous: "/h?before_seq=11" }), 11);
    assert.equal(cursorAfter({ results: [{ seq: 1 }], previous: null }), null);
    assert.equal(cursorAfter({ results: [], previous: null }), null);
  });
});

describe("OlderSteps", () => {
  it("reads page after page back to the start, each once, keeping the scroll position", async () => {
    await withDocument(async () => {
      const pages = {
        21: { results: [{ seq: 11 }, { seq: 20 }], previous: "x" },
        11: { results: [{ seq: 1 }, { seq: 10 }], previous: null },
      };
      const { older, scroller, asked, shown } = make(pages);
      older.setCursor(21);
      scroller.scrollTop = 50;
      await Promise.all([older.loadMore(), older.loadMore()]); // one read at a time
      assert.deepEqual(asked, [21]);
      assert.equal(scroller.scrollTop, 250); // 50 + the 200 px added above
      await older.loadMore();
      await older.loadMore(); // at the start: nothing more to read
      assert.deepEqual(asked, [21, 11]);
      assert.deepEqual(shown, [11, 20, 1, 10]);
      assert.equal(older.button.hidden, true);
    });
  });

  it("keeps the earliest start when a later read says less (a resume after a scroll)", async () => {
    await withDocument(async () => {
      const { older } = make({});
      older.setCursor(41);
      older.setCursor(21);
      older.setCursor(41);
      assert.equal(older.before, 21);
      older.setCursor(null); // a read that reached the thread's start
      assert.equal(older.before, null);
    });
  });
});
