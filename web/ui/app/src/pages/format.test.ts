import { describe, expect, it } from "vitest";
import { translator } from "../i18n";
import { endOfDay, fill, named, positive, rate, stamp, today, utcMinute } from "./format";

describe("what every page writes the same way", () => {
  const t = translator("en");

  it("writes instants in the reader's zone, to the minute or the second, and in UTC", () => {
    const d = new Date(2026, 0, 2, 3, 4, 5);
    expect(stamp(d.toISOString())).toBe("2026-01-02 03:04");
    expect(stamp(d.toISOString(), true)).toBe("2026-01-02 03:04:05");
    expect(utcMinute("2026-11-28T17:04:59.999Z")).toBe("2026-11-28 17:04 UTC");
  });

  it("makes a key or link valid through the picked day, where its owner is", () => {
    const end = new Date(endOfDay("2099-12-31")!);
    expect([end.getFullYear(), end.getMonth(), end.getDate(), end.getHours(), end.getMinutes(), end.getSeconds()]).toEqual([2099, 11, 31, 23, 59, 59]);
    expect(stamp(endOfDay("2026-03-09")!)).toBe("2026-03-09 23:59");
    expect(endOfDay("")).toBeUndefined();
    expect(today(new Date(2026, 1, 3, 23, 30))).toBe("2026-02-03");
    expect(today(new Date(2026, 11, 31, 0, 30))).toBe("2026-12-31");
  });

  it("reads optional whole numbers", () => {
    expect(positive("")).toBeUndefined();
    expect(positive("0")).toBeUndefined();
    expect(positive("-4")).toBeUndefined();
    expect(positive("30")).toBe(30);
    expect(positive("7.9")).toBe(7);
  });

  it("says rates in the reader's language", () => {
    expect(rate(t, 5)).toBe("5/min");
    expect(rate(t, 0)).toBe("no limit");
    expect(rate(t, undefined)).toBe("no limit");
    expect(rate(translator("zh"), 5)).toBe("5 次/分钟");
  });

  it("fills every placeholder it has a value for, and leaves the others", () => {
    expect(fill("{name} was deleted; their apps ({n}) now belong to {to}.", { name: "cleo", n: 1, to: "admin" })).toBe(
      "cleo was deleted; their apps (1) now belong to admin.",
    );
    expect(fill("{name} and {other}", { name: "a$&b" })).toBe("a$&b and {other}");
    expect(named(t, "keyRevoked", "ci")).toBe('The key "ci" was revoked.');
  });
});
