import { translator } from "./i18n";

describe("translator", () => {
  it("reads the language's words from the engine's label files", () => {
    expect(translator("en")("save")).toBe("Save");
    expect(translator("zh")("nodeType.tools")).toBe("工具调用");
  });

  it("falls back to English for an unknown language and to the key for an unknown word", () => {
    expect(translator("fr")("save")).toBe("Save");
    expect(translator("zh")("no.such.key")).toBe("no.such.key");
  });
});
