import { useEffect, useRef, useState } from "react";
import type { Translate } from "../../i18n";
import { expiredAt, type SendAnswer } from "./answer";
import type { Approval } from "./model";

// outcomeLabel is what became of an approval, as its card says it.
const outcomeKey: Record<string, string> = {
  approve: "approved",
  approveChat: "approvedChat",
  edit: "edited",
  reject: "rejectedAnswer",
  expired: "expired",
  lapsed: "lapsed",
};

// ApprovalCard asks the chat's owner about a command a rule wants a
// person to approve (P10): approve, approve for this chat, edit (the
// edited command is judged again) or reject with a reason. The answer is
// the next chat request, {interactive: {approvalId, decision, ...}}; the
// run goes on in a new turn. Without send (another user's chat, a turn
// the chat went past) it cannot be answered; lapsed says the chat went
// on without an answer.
export function ApprovalCard({ approval, t, send, lapsed, busy }: { approval: Approval; t: Translate; send?: SendAnswer; lapsed?: boolean; busy?: boolean }) {
  const [outcome, setOutcome] = useState<{ decision: string; detail: string } | null>(
    approval.decision ? { decision: approval.decision, detail: approval.detail ?? "" } : null,
  );
  const [editing, setEditing] = useState(false);
  const [rejecting, setRejecting] = useState(false);
  const [command, setCommand] = useState(approval.command);
  const [reason, setReason] = useState("");
  const [expired, setExpired] = useState(() => expiredAt(approval.expiresAt));
  const edit = useRef<HTMLTextAreaElement>(null);
  const why = useRef<HTMLInputElement>(null);

  // The card lapses by itself when its time is up.
  useEffect(() => {
    if (!approval.expiresAt || expired || outcome) return;
    const left = new Date(approval.expiresAt).getTime() - Date.now();
    const timer = setTimeout(() => setExpired(true), Math.max(0, Math.min(left, 2 ** 31 - 1)));
    return () => clearTimeout(timer);
  }, [approval.expiresAt, expired, outcome]);
  useEffect(() => edit.current?.focus(), [editing]);
  useEffect(() => why.current?.focus(), [rejecting]);

  const shown = outcome ?? (expired ? { decision: "expired", detail: "" } : lapsed ? { decision: "lapsed", detail: "" } : null);
  const answer = async (decision: string, extra: { command?: string; reason?: string }) => {
    if (!send) return;
    setOutcome({ decision, detail: extra.reason || extra.command || "" });
    const said = `${t(outcomeKey[decision])}: ${extra.command || approval.command}${extra.reason ? ` (${extra.reason})` : ""}`;
    if (!(await send(said, { interactive: { approvalId: approval.approvalId, decision, ...extra } }))) setOutcome(null);
  };
  const off = !send || busy;

  return (
    <div className={shown ? "approval answered" : "approval"} data-approval-id={approval.approvalId}>
      <div className="approval-title">{t("approvalNeeded")}</div>
      <pre className="approval-command" data-role="approval-command">
        {approval.command}
      </pre>
      <div className="hint" data-role="approval-why">
        {(approval.rule ? approval.rule + ": " : "") + (approval.justification || "")}
      </div>
      {!shown && approval.expiresAt && (
        <div className="hint" data-role="approval-expires">
          {t("expires")}: {new Date(approval.expiresAt).toLocaleString()}
        </div>
      )}
      {!shown && (
        <>
          {editing && (
            <textarea className="approval-edit" data-role="approval-edit" ref={edit} value={command} disabled={off} onChange={(e) => setCommand(e.target.value)} />
          )}
          {rejecting && (
            <input
              type="text"
              className="approval-reason"
              data-role="approval-reason"
              ref={why}
              placeholder={t("rejectReason")}
              value={reason}
              disabled={off}
              onChange={(e) => setReason(e.target.value)}
            />
          )}
          <div className="approval-actions">
            <button type="button" data-answer="approve" disabled={off} onClick={() => answer("approve", {})}>
              {t("approve")}
            </button>
            <button type="button" className="secondary" data-answer="approveChat" disabled={off} onClick={() => answer("approveChat", {})}>
              {t("approveChat")}
            </button>
            <button
              type="button"
              className="secondary"
              data-answer="edit"
              disabled={off}
              onClick={() => (!editing ? setEditing(true) : command.trim() && answer("edit", { command: command.trim() }))}
            >
              {t("edit")}
            </button>
            <button
              type="button"
              className="danger"
              data-answer="reject"
              disabled={off}
              onClick={() => (!rejecting ? setRejecting(true) : answer("reject", reason.trim() ? { reason: reason.trim() } : {}))}
            >
              {t("reject")}
            </button>
          </div>
        </>
      )}
      <div className="approval-outcome" data-role="approval-outcome">
        {shown ? t(outcomeKey[shown.decision] ?? shown.decision) + (shown.detail ? ": " + shown.detail : "") : ""}
      </div>
    </div>
  );
}
