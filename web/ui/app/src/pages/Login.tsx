import { useState } from "react";
import { request } from "./http";
import type { PageProps } from "./types";

// Login is the sign-in page; a signed-in person goes to the apps.
export function Login({ t }: PageProps) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const signIn = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget.elements as unknown as Record<string, HTMLInputElement>;
    setBusy(true);
    try {
      await request("POST", "/api/login", { name: form.name.value, password: form.password.value });
      location.href = "/";
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return (
    <form id="login" className="card" onSubmit={signIn}>
      <h2>{t("signIn")}</h2>
      <label htmlFor="name">{t("userName")}</label>
      <input type="text" id="name" name="name" autoComplete="username" required />
      <label htmlFor="password">{t("password")}</label>
      <input type="password" id="password" name="password" autoComplete="current-password" required />
      <p>
        <button type="submit" disabled={busy}>
          {t("signIn")}
        </button>{" "}
        <span className="error" data-role="status" role="alert">
          {error}
        </span>
      </p>
    </form>
  );
}
