import { cleanup, fireEvent, render } from "@testing-library/react";
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

describe("the header on a phone", () => {
  it("folds an admin's places into a menu named after the current place, and opens it", () => {
    window.history.pushState({}, "", "/admin/audit");
    const { container } = render(<Shell user={{ id: "u:ann", name: "ann", admin: true }} t={t} lang="en"><p /></Shell>);
    const toggle = container.querySelector<HTMLButtonElement>(".menu-toggle")!;
    expect(toggle.textContent).toBe("Audit ▾");
    expect(toggle.getAttribute("aria-expanded")).toBe("false");
    expect(container.querySelector("header")?.className).toBe("site-header folds");
    fireEvent.click(toggle);
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
    expect(container.querySelector("header")?.className).toBe("site-header folds open");
    expect(container.querySelector(`#${toggle.getAttribute("aria-controls")} a[aria-current=page]`)?.getAttribute("href")).toBe("/admin/audit");
  });

  it("leaves a user's two places as they are", () => {
    window.history.pushState({}, "", "/");
    const { container } = render(<Shell user={{ id: "u:bo", name: "bo" }} t={t} lang="en"><p /></Shell>);
    expect(container.querySelector(".menu-toggle")).toBeNull();
    expect(container.querySelector("header")?.className).toBe("site-header");
  });
});
