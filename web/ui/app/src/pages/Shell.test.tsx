import { cleanup, render } from "@testing-library/react";
import { translator } from "../i18n";
import { Shell } from "./Shell";

const t = translator("en");
afterEach(cleanup);

const marked = (path: string, admin = true) => {
  window.history.pushState({}, "", path);
  const { container } = render(
    <Shell user={{ id: "u:ann", name: "ann", admin }} t={t} lang="en">
      <p>page</p>
    </Shell>,
  );
  return [...container.querySelectorAll("nav a[aria-current=page]")].map((a) => a.getAttribute("href"));
};

describe("the header", () => {
  it("marks the one place a page belongs to", () => {
    expect(marked("/admin/users")).toEqual(["/admin/users"]);
    expect(marked("/admin")).toEqual(["/admin"]);
    expect(marked("/apps/demo/edit")).toEqual(["/"]);
    expect(marked("/admin/queues/")).toEqual(["/admin/queues/"]);
    expect(marked("/login")).toEqual([]);
  });

  it("shows the admins' places to admins only, and none to a share link's visitors", () => {
    window.history.pushState({}, "", "/");
    const user = render(<Shell user={{ id: "u:bo", name: "bo" }} t={t} lang="en"><p /></Shell>);
    expect([...user.container.querySelectorAll("nav a")].map((a) => a.getAttribute("href"))).toEqual(["/", "/account"]);
    cleanup();
    const visitor = render(<Shell user={{ id: "v:1", linkId: "L1" }} t={t} lang="en"><p /></Shell>);
    expect(visitor.container.querySelectorAll("nav a")).toHaveLength(0);
    expect(visitor.container.querySelector(".brand")?.getAttribute("href")).toBe("/share/L1");
    expect(visitor.container.querySelector("#logout")).toBeNull();
  });
});
