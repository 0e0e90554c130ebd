import type { ComponentType } from "react";
import { Apps } from "./apps/Apps";
import { Chats } from "./apps/Chats";
import { Publish } from "./apps/Publish";
import { Account } from "./accounts/Account";
import { SetPassword } from "./accounts/SetPassword";
import { Users } from "./accounts/Users";
import { Admin } from "./admin/Admin";
import { Audit } from "./admin/Audit";
import { MCP } from "./admin/MCP";
import { Skills } from "./admin/Skills";
import { Login } from "./Login";
import type { PageProps } from "./types";

// pages are the pages by the name the engine gives them (UI.Render in
// web/ui/ui.go): one line each.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const pages: Record<string, ComponentType<PageProps<any>>> = {
  login: Login,
  apps: Apps,
  chats: Chats,
  builder: Publish,
  account: Account,
  users: Users,
  setpassword: SetPassword,
  admin: Admin,
  audit: Audit,
  skills: Skills,
  mcp: MCP,
};
