package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// fastgptWorkflow is a workflow in the shape FastGPT exports: a start, a
// question classifier with two classes, an answer on each branch, and a
// knowledge-base search, which Flowbox has not.
const fastgptWorkflow = `{"nodes":[
 {"nodeId":"448745","name":"流程开始","flowNodeType":"workflowStart","position":{"x":0,"y":0},
  "inputs":[{"key":"userChatInput","renderTypeList":["reference","textarea"],"valueType":"string","label":"问题输入","value":""}],
  "outputs":[{"id":"userChatInput","key":"userChatInput","label":"core.module.input.label.user question","valueType":"string","type":"static"}]},
 {"nodeId":"cq1","name":"问题分类","flowNodeType":"classifyQuestion","position":{"x":400,"y":0},
  "inputs":[{"key":"model","renderTypeList":["selectLLMModel"],"valueType":"string","value":"flowbox-demo"},
   {"key":"systemPrompt","renderTypeList":["textarea"],"valueType":"string","value":""},
   {"key":"history","renderTypeList":["numberInput","reference"],"valueType":"chatHistory","value":6},
   {"key":"userChatInput","renderTypeList":["reference","textarea"],"valueType":"string","value":["448745","userChatInput"]},
   {"key":"agents","renderTypeList":["custom"],"valueType":"any","value":[{"value":"Greetings: hello, hi","key":"wqre"},{"value":"Refunds: money back","key":"sdfa"}]}],
  "outputs":[{"id":"cqResult","key":"cqResult","label":"分类结果","valueType":"string","type":"static"}]},
 {"nodeId":"a1","name":"问候","flowNodeType":"answerNode","position":{"x":800,"y":-100},
  "inputs":[{"key":"text","renderTypeList":["textarea","reference"],"valueType":"any","value":"Hello from FastGPT"}],"outputs":[]},
 {"nodeId":"a2","name":"退款","flowNodeType":"answerNode","position":{"x":800,"y":100},
  "inputs":[{"key":"text","renderTypeList":["textarea","reference"],"valueType":"any","value":"Refund: {{$cq1.cqResult$}}"}],"outputs":[]},
 {"nodeId":"ds","name":"知识库搜索","flowNodeType":"datasetSearchNode","position":{"x":800,"y":300},"inputs":[],"outputs":[]}],
 "edges":[{"source":"448745","target":"cq1","sourceHandle":"448745-source-right","targetHandle":"cq1-target-left"},
  {"source":"cq1","target":"a1","sourceHandle":"cq1-source-wqre","targetHandle":"a1-target-left"},
  {"source":"cq1","target":"a2","sourceHandle":"cq1-source-sdfa","targetHandle":"a2-target-left"},
  {"source":"cq1","target":"ds","sourceHandle":"cq1-source-sdfa","targetHandle":"ds-target-left"}],
 "chatConfig":{}}`

// A FastGPT workflow imported from the app list in Chromium: the report
// says what was left out, the app opens on the canvas, and a debug run
// takes the branch the question belongs to.
func TestImportBrowser(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	tb := e.signIn(t, "alice")
	file := filepath.Join(t.TempDir(), "fastgpt.json")
	if err := os.WriteFile(file, []byte(fastgptWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	tb.do(t,
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.ID("import-app")),
		chromedp.SetUploadFiles(chromedp.ID("import-file"), []string{file}),
		chromedp.Click(chromedp.CSS(`#import-app button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#import-app [data-role=summary]`)),
	)
	if got := tb.text(t, `#import-app [data-role=summary]`); !strings.Contains(got, "4 node(s) imported, 1 left out") {
		t.Errorf("the import says %q", got)
	}
	if got := tb.text(t, `#import-app .import-report`); !strings.Contains(got, "知识库搜索 (datasetSearchNode)") {
		t.Errorf("the report does not name the node left out: %q", got)
	}
	e.screenshot(t, tb, "import.png")
	open := run(t, tb, chromedp.AttributeValue(chromedp.CSS(`#import-app a.button`), "href")).Value
	if !strings.HasSuffix(open, "/flow") {
		t.Fatalf("the report links to %q, want the new app's canvas", open)
	}
	tb.do(t, chromedp.Navigate(e.url+open))
	run(t, tb, poll[bool](`() => document.querySelectorAll(".react-flow__node").length === 4`))
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .debug-toggle`)), chromedp.WaitVisible(chromedp.CSS(`.debug-ask input`)))
	tb.typeInto(t, `.debug-ask input`, "I want my money back")
	tb.do(t, chromedp.Click(chromedp.CSS(`.debug-ask button[type=submit]`)))
	run(t, tb, poll[bool](`() => (document.querySelector(".debug-answer") || {}).textContent === "Refund: Refunds: money back"`))
	e.screenshot(t, tb, "import-canvas.png")
}
