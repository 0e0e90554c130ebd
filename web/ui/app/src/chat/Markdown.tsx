import { useEffect, useMemo, useState } from "react";
import { renderMarkdown } from "./markdown";
import "./markdown.css";

// Rendering and sanitising an answer takes a few milliseconds; a chat of
// a hundred turns would spend most of its first second on answers out of
// view. Deferred answers show as plain text at first and are rendered when
// the browser is idle, newest first (the last scheduled is the lowest on
// the page, nearest the reader), a few per idle period.
type Job = { run: () => void; cancelled: boolean };
const queue: Job[] = [];
let draining = false;

const idle: (cb: (d: { timeRemaining(): number }) => void) => void =
  typeof requestIdleCallback === "function"
    ? (cb) => requestIdleCallback(cb, { timeout: 200 })
    : (cb) => setTimeout(() => cb({ timeRemaining: () => 8 }), 0);

function drain(deadline: { timeRemaining(): number }) {
  do {
    const job = queue.pop();
    if (job && !job.cancelled) job.run();
  } while (queue.length && deadline.timeRemaining() > 2);
  if (queue.length) idle(drain);
  else draining = false;
}

function later(run: () => void): () => void {
  const job = { run, cancelled: false };
  queue.push(job);
  if (!draining) {
    draining = true;
    idle(drain);
  }
  return () => {
    job.cancelled = true;
  };
}

/** Markdown shows an answer rendered by renderMarkdown (sanitised HTML);
 * a deferred one is plain text until the browser is idle. */
export function Markdown({ text, className, defer = false }: { text: string; className?: string; defer?: boolean }) {
  const eager = useMemo(() => (defer ? null : renderMarkdown(text)), [text, defer]);
  const [late, setLate] = useState<{ text: string; html: string } | null>(null);
  useEffect(() => {
    if (!defer) return;
    return later(() => setLate({ text, html: renderMarkdown(text) }));
  }, [text, defer]);
  const cls = className ? `markdown ${className}` : "markdown";
  const html = eager ?? (late?.text === text ? late.html : null);
  if (html === null) return <div className={cls + " pending"}>{text}</div>;
  return <div className={cls} dangerouslySetInnerHTML={{ __html: html }} />;
}
