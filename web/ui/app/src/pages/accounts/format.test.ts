import { deletePath, deletedLabel, endOfDay, fill, minute, today, utcMinute } from "./format";

describe("account page formats", () => {
  it("writes times to the minute, here and in UTC", () => {
    const d = new Date(2026, 0, 5, 7, 3, 59);
    expect(minute(d.toISOString())).toBe("2026-01-05 07:03");
    expect(utcMinute("2026-11-28T17:04:59.999Z")).toBe("2026-11-28 17:04 UTC");
  });

  it("makes a key valid through the chosen day, here", () => {
    const end = new Date(endOfDay("2099-12-31"));
    expect([end.getFullYear(), end.getMonth(), end.getDate(), end.getHours(), end.getMinutes(), end.getSeconds()]).toEqual([2099, 11, 31, 23, 59, 59]);
    expect(today(new Date(2026, 1, 3, 23, 30))).toBe("2026-02-03");
  });

  it("fills every placeholder it has a value for, and leaves the others", () => {
    expect(fill("{name} was deleted; their apps ({n}) now belong to {to}.", { name: "cleo", n: 1, to: "admin" })).toBe(
      "cleo was deleted; their apps (1) now belong to admin.",
    );
    expect(fill("{name} and {other}", { name: "a$&b" })).toBe("a$&b and {other}");
  });

  it("deletes a user keeping or deleting their apps", () => {
    expect(deletePath("u:cleo", "transfer", "u:a&b")).toBe("/admin/api/users/u%3Acleo?apps=transfer&to=u%3Aa%26b");
    expect(deletePath("u:cleo", "delete", "u:admin")).toBe("/admin/api/users/u%3Acleo?apps=delete");
    expect(deletedLabel(0, "transfer")).toBe("userDeleted");
    expect(deletedLabel(2, "transfer")).toBe("userDeletedTransfer");
    expect(deletedLabel(2, "delete")).toBe("userDeletedApps");
  });
});
