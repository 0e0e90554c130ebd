import { render } from "@testing-library/react";
import { renderMarkdown } from "./markdown";
import { Markdown } from "./Markdown";

function dom(text: string): HTMLElement {
  const div = document.createElement("div");
  div.innerHTML = renderMarkdown(text);
  return div;
}

describe("renderMarkdown", () => {
  it("renders headings, lists, quotes and emphasis", () => {
    const d = dom("# Title\n\n## Sub\n\n- one\n- two\n\n1. first\n2. second\n\n> quoted **bold** _it_");
    expect(d.querySelector("h1")?.textContent).toBe("Title");
    expect(d.querySelector("h2")?.textContent).toBe("Sub");
    expect([...d.querySelectorAll("ul li")].map((li) => li.textContent)).toEqual(["one", "two"]);
    expect([...d.querySelectorAll("ol li")].map((li) => li.textContent)).toEqual(["first", "second"]);
    expect(d.querySelector("blockquote strong")?.textContent).toBe("bold");
    expect(d.querySelector("blockquote em")?.textContent).toBe("it");
  });

  it("renders GFM tables", () => {
    const d = dom("| name | size |\n|---|--:|\n| a.txt | 12 |\n| b.csv | 3 |");
    expect([...d.querySelectorAll("th")].map((th) => th.textContent)).toEqual(["name", "size"]);
    expect([...d.querySelectorAll("tbody td")].map((td) => td.textContent)).toEqual(["a.txt", "12", "b.csv", "3"]);
  });

  it("highlights fenced code in a known language and escapes code in any", () => {
    const d = dom("```go\nfunc main() { fmt.Println(\"<b>\") }\n```\n\n```nosuchlang\n<b>x</b>\n```");
    const [goBlock, other] = d.querySelectorAll("pre code");
    expect(goBlock.className).toContain("language-go");
    expect(goBlock.querySelector(".hljs-keyword")?.textContent).toBe("func");
    expect(goBlock.textContent).toContain('"<b>"');
    expect(goBlock.querySelector("b")).toBeNull();
    expect(other.textContent).toBe("<b>x</b>\n");
    expect(other.querySelector("b")).toBeNull();
    expect(d.querySelector("code")?.textContent).toContain("func main");
  });

  it("opens links in a new tab without an opener", () => {
    const a = dom("see [docs](https://example.com/docs) and https://example.org").querySelectorAll("a");
    expect(a).toHaveLength(2);
    for (const link of a) {
      expect(link.getAttribute("target")).toBe("_blank");
      expect(link.getAttribute("rel")).toContain("noopener");
    }
    expect(a[0].getAttribute("href")).toBe("https://example.com/docs");
  });

  it("leaves scripts, event handlers and javascript: links inert", () => {
    const d = dom(
      '<script>window.pwned=1</script>\n\n<img src=x onerror="window.pwned=1">\n\n' +
        "[click](javascript:alert(1)) [x](JaVaScRiPt:alert(1)) [d](data:text/html;base64,PHNjcmlwdD4=) [v](vbscript:msgbox)\n\n" +
        '![i](x" onerror="alert(1))\n\n<a href="javascript:alert(1)">raw</a>',
    );
    expect(d.querySelector("script")).toBeNull();
    expect(d.querySelector("[onerror]")).toBeNull();
    for (const el of d.querySelectorAll("*")) {
      for (const attr of el.attributes) {
        expect(attr.name.startsWith("on")).toBe(false);
        expect(attr.value.toLowerCase()).not.toMatch(/^\s*(javascript|vbscript|data):/);
      }
    }
    // The raw HTML is shown as text, not dropped silently.
    expect(d.textContent).toContain("<script>window.pwned=1</script>");
    expect(d.querySelectorAll("a[href]")).toHaveLength(0);
  });

  it("typesets math as MathML, inline and as a block, without the TeX beside it", () => {
    const d = dom("Euler: $e^{i\\pi} + 1 = 0$.\n\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$");
    const maths = d.querySelectorAll("math");
    expect(maths).toHaveLength(2);
    expect(maths[0].getAttribute("display")).toBeNull();
    expect(maths[0].querySelector("msup mi")?.textContent).toBe("e");
    expect(maths[1].getAttribute("display")).toBe("block");
    expect(maths[1].querySelector("mfrac")?.textContent).toBe("13");
    expect(d.textContent).not.toContain("\\frac");
    expect(d.textContent).not.toContain("\\pi");
  });

  it("leaves dollars in prose as text, shows bad TeX as text and runs nothing from math", () => {
    const d = dom("It costs $5 and $10, or $HOME and $PATH.\n\n$\\frac{1}{$ and $\\href{javascript:alert(1)}{x}$ and $\\text{<img src=x onerror=alert(1)>}$");
    expect(d.querySelector("p")?.textContent).toBe("It costs $5 and $10, or $HOME and $PATH.");
    expect(d.querySelector(".katex-error")?.textContent).toBe("\\frac{1}{");
    expect(d.querySelector("img, a, [onerror], [href]")).toBeNull();
    for (const el of d.querySelectorAll("*")) for (const attr of el.attributes) expect(attr.name.startsWith("on")).toBe(false);
  });
});

describe("Markdown", () => {
  it("renders an answer into the page", () => {
    const { container } = render(<Markdown text={"**done**: `ls`"} />);
    expect(container.querySelector(".markdown strong")?.textContent).toBe("done");
    expect(container.querySelector(".markdown code")?.textContent).toBe("ls");
  });
});
