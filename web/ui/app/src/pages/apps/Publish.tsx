import { ApiKeys } from "../ApiKeys";
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
        <Links base={base} t={t} />
      </div>
    </>
  );
}
