package web

// Labels of the audit page.
func init() {
	more := map[string]map[string]string{
		"en": {
			"audit": "Audit", "auditUser": "User", "auditApp": "App", "auditChat": "Chat", "auditKind": "Kind",
			"auditAny": "any", "auditCommand": "command", "auditFile": "file", "auditDecision": "Decision",
			"auditSince": "From", "auditUntil": "Until", "auditApply": "Apply", "auditExport": "Export (JSON lines)",
			"auditTime": "Time", "auditWho": "Who", "auditWhere": "App / chat", "auditWhat": "Command or file",
			"auditExit": "Exit", "auditDuration": "Duration", "auditOutput": "Output (out/err bytes)",
			"auditFirst": "Newest", "auditNext": "Next page", "auditNone": "No records match.",
			"auditTruncated": "truncated",
		},
		"zh": {
			"audit": "审计", "auditUser": "用户", "auditApp": "应用", "auditChat": "对话", "auditKind": "类型",
			"auditAny": "全部", "auditCommand": "命令", "auditFile": "文件", "auditDecision": "决定",
			"auditSince": "起始", "auditUntil": "截止", "auditApply": "筛选", "auditExport": "导出(JSON Lines)",
			"auditTime": "时间", "auditWho": "执行者", "auditWhere": "应用 / 对话", "auditWhat": "命令或文件",
			"auditExit": "退出码", "auditDuration": "耗时", "auditOutput": "输出(stdout/stderr 字节)",
			"auditFirst": "最新", "auditNext": "下一页", "auditNone": "没有匹配的记录。",
			"auditTruncated": "已截断",
		},
	}
	for lang, m := range more {
		for k, v := range m {
			labels[lang][k] = v
		}
	}
}
