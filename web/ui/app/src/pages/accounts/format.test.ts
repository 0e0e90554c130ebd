import { deletePath, deletedLabel } from "./format";

describe("account page formats", () => {
  it("deletes a user keeping or deleting their apps", () => {
    expect(deletePath("u:cleo", "transfer", "u:a&b")).toBe("/admin/api/users/u%3Acleo?apps=transfer&to=u%3Aa%26b");
    expect(deletePath("u:cleo", "delete", "u:admin")).toBe("/admin/api/users/u%3Acleo?apps=delete");
    expect(deletedLabel(0, "transfer")).toBe("userDeleted");
    expect(deletedLabel(2, "transfer")).toBe("userDeletedTransfer");
    expect(deletedLabel(2, "delete")).toBe("userDeletedApps");
  });
});
