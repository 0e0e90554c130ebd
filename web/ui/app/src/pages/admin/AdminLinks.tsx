import type { Translate } from "../../i18n";

const places = [
  ["/admin", "sandboxes"],
  ["/admin/users", "users"],
  ["/admin/audit", "audit"],
  ["/admin/skills", "skills"],
  ["/admin/mcp", "mcpServers"],
  ["/admin/queues/", "queues"],
] as const;

// AdminLinks are the admin pages other than the one shown (here).
export function AdminLinks({ t, here }: { t: Translate; here: string }) {
  const others = places.filter(([href]) => href !== here);
  return (
    <p className="admin-links">
      {others.map(([href, label], i) => (
        <span key={href}>
          {i > 0 && " · "}
          <a href={href}>{t(label)}</a>
        </span>
      ))}
    </p>
  );
}
