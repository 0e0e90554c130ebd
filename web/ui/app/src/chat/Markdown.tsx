import { useMemo } from "react";
import { renderMarkdown } from "./markdown";
import "./markdown.css";

/** Markdown shows an answer rendered by renderMarkdown (sanitised HTML). */
export function Markdown({ text, className }: { text: string; className?: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div className={className ? `markdown ${className}` : "markdown"} dangerouslySetInnerHTML={{ __html: html }} />;
}
