// Answers are Markdown: CommonMark with GFM tables and strikethrough, raw
// HTML off (markdown-it escapes it as text), and the rendered HTML passed
// through DOMPurify as a second guard. Code blocks are highlighted by
// highlight.js core with a fixed set of common languages, bundled: nothing
// is fetched when a page runs. The same function renders history, streamed
// answers, share links and run details (E1). Math between $…$ (inline)
// and $$…$$ (a block) is typeset by KaTeX as MathML, which Chromium,
// Firefox and Safari draw themselves: no style sheet, font or inline style
// (which the pages' CSP refuses) is needed.
import MarkdownIt from "markdown-it";
import katexModule from "@vscode/markdown-it-katex";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const languages = { bash, css, diff, go, java, javascript, json, markdown, python, sql, typescript, xml, yaml };
for (const [name, lang] of Object.entries(languages)) hljs.registerLanguage(name, lang);
hljs.registerAliases(["sh", "shell", "zsh"], { languageName: "bash" });
hljs.registerAliases(["js", "jsx"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["yml"], { languageName: "yaml" });

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string);

const md = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: false,
  highlight(code: string, lang: string): string {
    const name = lang.trim().toLowerCase();
    if (name && hljs.getLanguage(name)) {
      try {
        return `<pre class="hljs"><code class="language-${escapeHtml(name)}">${hljs.highlight(code, { language: name, ignoreIllegals: true }).value}</code></pre>`;
      } catch {
        // falls through to plain text
      }
    }
    return `<pre class="hljs"><code>${escapeHtml(code)}</code></pre>`;
  },
});

// The plugin is a CommonJS module whose default export Vite's build hands
// over as the module itself, and Vitest as the function.
const katex = ((katexModule as unknown as { default?: typeof katexModule }).default ?? katexModule) as typeof katexModule;
md.use(katex, { output: "mathml", throwOnError: false, maxSize: 20, maxExpand: 200, trust: false });

// Only web and mail links: markdown-it already refuses javascript:,
// vbscript: and most data: URLs; this narrows it to what an answer needs.
const safeScheme = /^(https?:|mailto:|#|\/(?!\/)|\.{0,2}\/)/i;
md.validateLink = (url: string) => safeScheme.test(url.trim()) || !/^[a-z][a-z0-9+.-]*:/i.test(url.trim());

// Links open in a new tab without handing the answer's page to it.
const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx].attrSet("target", "_blank");
  tokens[idx].attrSet("rel", "noopener noreferrer");
  return defaultLinkOpen(tokens, idx, options, env, self);
};

let hooked = false;
function purify(html: string): string {
  if (!hooked) {
    // DOMPurify drops target by default; keep it on links, always with rel.
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
    hooked = true;
  }
  // MathML's <semantics> and <annotation> (the TeX source) are not kept:
  // their text would show beside the math.
  return DOMPurify.sanitize(html, {
    ADD_ATTR: ["target"],
    FORBID_TAGS: ["style", "form", "input", "button"],
    ADD_FORBID_CONTENTS: ["annotation", "annotation-xml"],
  });
}

/** renderMarkdown turns an answer's Markdown into sanitised HTML. */
export function renderMarkdown(text: string): string {
  return purify(md.render(text ?? ""));
}
