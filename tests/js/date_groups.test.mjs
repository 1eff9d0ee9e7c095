// The sidebar's date groups (date_groups.js): calendar days in whatever time zone node runs
// in (the dates are built in it), months by name.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dateGroup, groupByDate } from "../../sessions_app/static/tether/date_groups.js";

const at = (y, m, d, h = 12, min = 0) => new Date(y, m - 1, d, h, min);
const now = at(2026, 12, 2, 0, 10); // ten past midnight

describe("dateGroup", () => {
  it("counts calendar days, not hours", () => {
    assert.equal(dateGroup(at(2026, 12, 2, 0, 5), now).key, "today");
    assert.equal(dateGroup(at(2026, 12, 1, 23, 30), now).key, "yesterday"); // 40 minutes ago
    assert.equal(dateGroup(at(2026, 11, 30, 0, 20), now).key, "week"); // two days
    assert.equal(dateGroup(at(2026, 11, 25, 1), now).key, "week"); // seven days
    assert.equal(dateGroup(at(2026, 11, 24, 23), now).key, "month"); // eight days
    assert.equal(dateGroup(at(2026, 11, 2), now).key, "month"); // thirty days
  });
  it("names older months, and a clock a little ahead is today", () => {
    const october = dateGroup(at(2026, 10, 31), now, "en-US");
    assert.deepEqual(october, { key: "2026-10", label: "October 2026" });
    assert.equal(dateGroup(at(2025, 12, 25), now, "fr-FR").label, "décembre 2025");
    assert.equal(dateGroup(at(2026, 12, 2, 0, 20), now).key, "today");
    assert.equal(dateGroup("not a date", now).key, "today");
  });
  it("reads ISO strings as the API gives them", () => {
    assert.equal(dateGroup(new Date(now.getTime() - 60_000).toISOString(), now).label, "Today");
  });
});

describe("groupByDate", () => {
  it("keeps the list's order and makes one group per run of a key", () => {
    const threads = [
      { id: "a", updatedAt: at(2026, 12, 2, 0, 1).toISOString() },
      { id: "b", updatedAt: at(2026, 12, 1, 9).toISOString() },
      { id: "c", updatedAt: at(2026, 12, 1, 8).toISOString() },
      { id: "d", updatedAt: at(2026, 9, 3).toISOString() },
    ];
    const groups = groupByDate(threads, now, "en-US");
    assert.deepEqual(
      groups.map((g) => [g.label, g.threads.map((t) => t.id)]),
      [["Today", ["a"]], ["Yesterday", ["b", "c"]], ["September 2026", ["d"]]],
    );
  });
});
