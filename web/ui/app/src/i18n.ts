// The UI's words: the same files the engine's pages read
// (web/ui/labels/<lang>.json), English where a language has no text.
import en from "../../labels/en.json";
import zh from "../../labels/zh.json";

const languages: Record<string, Record<string, string>> = { en, zh };

export type Translate = (key: string) => string;

// translator returns t(key) for a language; an unknown language is
// English, and an unknown key is the key itself, so it shows in review.
export function translator(lang: string): Translate {
  const words = languages[lang] ?? en;
  return (key) => words[key] ?? (en as Record<string, string>)[key] ?? key;
}
