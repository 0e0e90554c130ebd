import { useEffect, useState, type FormEvent } from "react";
import type { Translate } from "../../i18n";
import { ApiKeys } from "../ApiKeys";
import { request, useLoaded } from "../http";
import { Status, useStatus } from "../Status";
import type { PageProps } from "../types";
import { Links } from "./Links";

// BuilderData is the Publish page's data (builderPage in web/ui/ui.go).
export interface BuilderData {
  appId: string;
  name: string;
}

// Publish is an app's Publish page: the API keys that reach only this
// app, and its share links; both read from the API when the page opens.
export function Publish({ data, t }: PageProps<BuilderData>) {
  const base = "/api/apps/" + encodeURIComponent(data.appId);
  return (
    <>
      <h2>
        {t("publishTab")}: {data.name}
      </h2>
      <p>
        <a id="open-canvas" className="button secondary" href={"/apps/" + encodeURIComponent(data.appId) + "/flow"}>
          {t("canvas")}
        </a>
      </p>
      <div id="publish" data-app={data.appId}>
        <ApiKeys
          api={base + "/keys"}
          id="app-key"
          words={{ title: "publishKeys", hint: "publishKeysHint", empty: "publishNoKeys", revokeConfirm: "publishRevokeKeyConfirm" }}
          usage={
            <p className="hint" data-role="usage">
              {t("publishKeyUsage")}
            </p>
          }
          t={t}
        />
        <TerminalSetting base={base} t={t} />
        <IdleSetting base={base} t={t} />
        <RewindSetting base={base} t={t} />
        <Links base={base} t={t} />
      </div>
    </>
  );
}

// IdleSetting is how long the app's chats' sandboxes may go unused
// before they stop (R4): the engine's 5 minutes unless set, within the
// engine's bound.
function IdleSetting({ base, t }: { base: string; t: Translate }) {
  const { said, say, fail } = useStatus();
  const [app, load] = useLoaded<{ idleMinutes?: number }>(base, fail);
  const [minutes, setMinutes] = useState("");
  useEffect(() => {
    if (app) setMinutes(app.idleMinutes ? String(app.idleMinutes) : "");
  }, [app]);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    try {
      await request("PATCH", base, { idleMinutes: minutes.trim() === "" ? 0 : Number(minutes) });
      say(t("appIdleSaved"));
    } catch (err) {
      fail(err);
    }
    await load();
  };
  return (
    <section id="idle-setting" className="card">
      <h3>{t("appIdle")}</h3>
      <form className="row" onSubmit={(e) => void save(e)}>
        <label htmlFor="app-idle">{t("appIdleLabel")}</label>
        <input id="app-idle" type="number" min={0} step={1} inputMode="numeric" placeholder="5" value={minutes} disabled={!app} onChange={(e) => setMinutes(e.currentTarget.value)} />
        <button type="submit" className="secondary" disabled={!app}>
          {t("save")}
        </button>
      </form>
      <p className="hint">{t("appIdleHint")}</p>
      <Status said={said} t={t} />
    </section>
  );
}

// RewindApp is what RewindSetting reads of the app: its settings, and
// the engine's retention (the most they may be), there only when the
// engine keeps checkpoints of chats' sandboxes.
interface RewindApp {
  checkpointKeep?: number;
  checkpointMaxAgeHours?: number;
  checkpointLimits?: { keep: number; maxAgeHours: number };
}

// RewindSetting is how far back the app's chats can go (R4): the engine
// keeps the checkpoints of their last turns, and the app may keep fewer,
// or for less long. Shown only where the engine keeps checkpoints.
function RewindSetting({ base, t }: { base: string; t: Translate }) {
  const { said, say, fail } = useStatus();
  const [app, load] = useLoaded<RewindApp>(base, fail);
  const [keep, setKeep] = useState("");
  const [hours, setHours] = useState("");
  useEffect(() => {
    if (!app) return;
    setKeep(app.checkpointKeep ? String(app.checkpointKeep) : "");
    setHours(app.checkpointMaxAgeHours ? String(app.checkpointMaxAgeHours) : "");
  }, [app]);
  const limits = app?.checkpointLimits;
  if (!limits) return null;
  const number = (v: string) => (v.trim() === "" ? 0 : Number(v));
  const save = async (e: FormEvent) => {
    e.preventDefault();
    try {
      await request("PATCH", base, { checkpointKeep: number(keep), checkpointMaxAgeHours: number(hours) });
      say(t("appRewindSaved"));
    } catch (err) {
      fail(err);
    }
    await load();
  };
  return (
    <section id="rewind-setting" className="card">
      <h3>{t("appRewind")}</h3>
      <form className="row" onSubmit={(e) => void save(e)}>
        <label htmlFor="app-rewind-keep">{t("appRewindKeepLabel")}</label>
        <input id="app-rewind-keep" type="number" min={0} max={limits.keep} step={1} inputMode="numeric" placeholder={String(limits.keep)} value={keep} onChange={(e) => setKeep(e.currentTarget.value)} />
        <label htmlFor="app-rewind-hours">{t("appRewindHoursLabel")}</label>
        <input id="app-rewind-hours" type="number" min={0} max={limits.maxAgeHours} step={1} inputMode="numeric" placeholder={String(limits.maxAgeHours)} value={hours} onChange={(e) => setHours(e.currentTarget.value)} />
        <button type="submit" className="secondary">
          {t("save")}
        </button>
      </form>
      <p className="hint">{t("appRewindHint").replace("{keep}", String(limits.keep)).replace("{hours}", String(limits.maxAgeHours))}</p>
      <Status said={said} t={t} />
    </section>
  );
}

// TerminalSetting is the app's switch for the web terminal in its chats
// (L1): on by default for a chat's owner; share links' visitors need a
// link that allows it too.
function TerminalSetting({ base, t }: { base: string; t: Translate }) {
  const { said, say, fail } = useStatus();
  const [app, load] = useLoaded<{ terminalOff?: boolean }>(base, fail);
  const toggle = async (on: boolean) => {
    try {
      await request("PATCH", base, { terminalOff: !on });
      say(t(on ? "appTerminalOn" : "appTerminalOff"));
    } catch (err) {
      fail(err);
    }
    await load();
  };
  return (
    <section id="terminal-setting" className="card">
      <h3>{t("terminal")}</h3>
      <label className="switch" htmlFor="app-terminal">
        <input type="checkbox" id="app-terminal" checked={app ? !app.terminalOff : false} disabled={!app} onChange={(e) => toggle(e.currentTarget.checked)} />{" "}
        {t("appTerminalSwitch")}
      </label>
      <p className="hint">{t("appTerminalHint")}</p>
      <Status said={said} t={t} />
    </section>
  );
}
