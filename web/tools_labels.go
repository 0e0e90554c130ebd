package web

// Labels of the tools besides the sandbox: the admins' MCP servers page
// and the builder's choice of exec tools and MCP servers.
func init() {
	more := map[string]map[string]string{
		"en": {
			"mcpServers": "MCP servers",
			"mcpHint":    "MCP servers give the apps' agents more tools. An HTTP server is reached from the engine, with the headers and token given here; a stdio server is a program started inside each chat's sandbox. Each app chooses in its builder the servers its agent may use.",
			"mcpAdd":     "Add a server", "mcpEditTitle": "Edit the server {id}", "mcpAddButton": "Add server",
			"mcpId":         "ID",
			"mcpIdHint":     "Lowercase letters, digits, - and _ (at most 32). The model sees the server's tools as {id}__{tool}; the ID cannot be changed later.",
			"mcpTransport":  "Transport",
			"transporthttp": "HTTP", "transportstdio": "stdio",
			"mcpTransportHttp":  "HTTP (streamable HTTP, reached from the engine)",
			"mcpTransportStdio": "stdio (a program run inside the chat's sandbox)",
			"mcpURL":            "URL", "mcpHeaders": "Headers",
			"mcpHeadersHint": "One per line, as \"Name: value\"; sent with every request to the server. A stored value shows as •••; leave it so to keep it.",
			"mcpToken":       "Bearer token",
			"mcpTokenHint":   "Sent as \"Authorization: Bearer <token>\". A stored token shows as •••: leave it so to keep it, or clear the field to remove it.",
			"mcpCommand":     "Command",
			"mcpCommandHint": "The program and its arguments, one per line, run inside the chat's sandbox; for example /workspace/mcp-server.",
			"mcpEnabled":     "Apps may use this server",
			"mcpWhere":       "URL or command", "mcpHasToken": "Token", "mcpYes": "yes", "mcpNo": "no",
			"mcpOn": "enabled", "mcpOff": "disabled", "mcpHeaderNames": "Headers: {names}",
			"mcpListTools": "List tools", "mcpNone": "No MCP servers are registered.",
			"mcpAdded": "The server \"{name}\" was added.", "mcpSaved": "The server \"{name}\" was saved.",
			"mcpDeleteConfirm": "Delete the MCP server \"{name}\"? The apps that chose it can no longer use its tools.",
			"mcpDeleted":       "The server \"{name}\" was deleted.",
			"mcpHeaderLine":    "Header line {n} is not \"Name: value\".",
			"mcpToolsOf":       "Tools of {name}", "mcpToolsListing": "Listing the tools of {name}…",
			"mcpToolsCount": "The server offers {n} tool(s).", "mcpNoTools": "The server offers no tools.",
			"mcpToolsFailed": "The tools of {name} could not be listed: {reason}",
			"mcpModelName":   "Name for the model", "mcpToolName": "Tool", "mcpToolDescription": "Description", "mcpReadOnly": "Read-only",

			"toolsExec":        "Exec tools",
			"toolsNoExec":      "No exec tools are declared on this engine; the operator declares them (FLOWBOX_EXEC_TOOLS).",
			"toolsNoMCP":       "No MCP servers are enabled; an admin registers them on the MCP servers page.",
			"toolsLoadFailed":  "The available tools could not be listed ({reason}); saving keeps this app's tools as they are.",
			"toolNotAvailable": "no longer available",
			"toolRunsHost":     "runs on the engine's host", "toolRunsSandbox": "runs in the chat's sandbox",
			"toolReadOnly": "read-only", "toolDestructive": "destructive",
			"toolOneOf": "one tool of {server}",
		},
		"zh": {
			"mcpServers": "MCP 服务器",
			"mcpHint":    "MCP 服务器为应用的 Agent 提供更多工具。HTTP 服务器由引擎连接,使用此处填写的请求头和令牌;stdio 服务器是在每个对话的沙盒中启动的程序。每个应用在编排页面中选择其 Agent 可使用的服务器。",
			"mcpAdd":     "添加服务器", "mcpEditTitle": "编辑服务器 {id}", "mcpAddButton": "添加服务器",
			"mcpId":         "ID",
			"mcpIdHint":     "小写字母、数字、- 和 _(最多 32 个字符)。模型看到的工具名为 {id}__{工具};ID 之后不能修改。",
			"mcpTransport":  "传输方式",
			"transporthttp": "HTTP", "transportstdio": "stdio",
			"mcpTransportHttp":  "HTTP(可流式 HTTP,由引擎连接)",
			"mcpTransportStdio": "stdio(在对话沙盒中运行的程序)",
			"mcpURL":            "URL", "mcpHeaders": "请求头",
			"mcpHeadersHint": "每行一个,格式为 \"名称: 值\";每次请求服务器时发送。已保存的值显示为 •••,保持不变即保留原值。",
			"mcpToken":       "Bearer 令牌",
			"mcpTokenHint":   "以 \"Authorization: Bearer <令牌>\" 发送。已保存的令牌显示为 •••:保持不变即保留,清空即删除。",
			"mcpCommand":     "命令",
			"mcpCommandHint": "程序及其参数,每行一个,在对话的沙盒中运行;例如 /workspace/mcp-server。",
			"mcpEnabled":     "应用可以使用此服务器",
			"mcpWhere":       "URL 或命令", "mcpHasToken": "令牌", "mcpYes": "是", "mcpNo": "否",
			"mcpOn": "已启用", "mcpOff": "已停用", "mcpHeaderNames": "请求头:{names}",
			"mcpListTools": "列出工具", "mcpNone": "尚未注册任何 MCP 服务器。",
			"mcpAdded": "已添加服务器 \"{name}\"。", "mcpSaved": "已保存服务器 \"{name}\"。",
			"mcpDeleteConfirm": "删除 MCP 服务器 \"{name}\"?选择了它的应用将无法再使用其工具。",
			"mcpDeleted":       "服务器 \"{name}\" 已删除。",
			"mcpHeaderLine":    "请求头第 {n} 行不是 \"名称: 值\" 格式。",
			"mcpToolsOf":       "{name} 的工具", "mcpToolsListing": "正在列出 {name} 的工具…",
			"mcpToolsCount": "该服务器提供 {n} 个工具。", "mcpNoTools": "该服务器没有提供工具。",
			"mcpToolsFailed": "无法列出 {name} 的工具:{reason}",
			"mcpModelName":   "模型看到的名称", "mcpToolName": "工具", "mcpToolDescription": "描述", "mcpReadOnly": "只读",

			"toolsExec":        "Exec 工具",
			"toolsNoExec":      "此引擎未声明 exec 工具;由运维人员声明(FLOWBOX_EXEC_TOOLS)。",
			"toolsNoMCP":       "没有已启用的 MCP 服务器;管理员可在“MCP 服务器”页面注册。",
			"toolsLoadFailed":  "无法列出可用的工具({reason});保存时将保留此应用当前的工具。",
			"toolNotAvailable": "已不可用",
			"toolRunsHost":     "在引擎主机上运行", "toolRunsSandbox": "在对话沙盒中运行",
			"toolReadOnly": "只读", "toolDestructive": "破坏性",
			"toolOneOf": "{server} 中的一个工具",
		},
	}
	for lang, m := range more {
		for k, v := range m {
			labels[lang][k] = v
		}
	}
}
