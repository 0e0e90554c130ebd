package web

import "fmt"

// publishLabels are the labels of the builder's Publish tab: the app's API
// keys and its share links. They join labels at start-up.
var publishLabels = map[string]map[string]string{
	"en": {
		"publishSettingsTab": "Settings", "publishTab": "Publish",
		"publishKeys":      "API keys for this app",
		"publishKeysHint":  "Programs that use one of these keys reach this app and no other.",
		"publishKeyUsage":  "Send it as \"Authorization: Bearer <key>\" to /api/v1/chat/completions; it reaches only this app. Name your end user in customUid.",
		"publishKeySecret": "The new API key", "publishExpiresOn": "Expires on (optional)", "publishKeyRate": "Requests per minute (optional)",
		"publishExpires": "Expires", "publishRate": "Rate", "publishNoExpiry": "no expiry", "publishExpired": "expired",
		"publishNoLimit": "no limit", "publishPerMinute": "{n}/min", "publishNoKeys": "This app has no API keys.",
		"publishKeyRevoked":       "The key \"{name}\" was revoked.",
		"publishRevokeKeyConfirm": "Revoke the key \"{name}\"? Programs using it can no longer reach this app.",
		"publishLinks":            "Share links",
		"publishLinksHint":        "Visitors chat with this app through a link, without an account; each visitor sees only their own chats.",
		"publishNewLink":          "New link", "publishVisitorRate": "Requests per minute per visitor", "publishMaxRuns": "Max total runs",
		"publishShowTools": "Visitors see the tool cards", "publishFilesPanel": "Files panel",
		"publishFileshidden": "hidden", "publishFilesread": "read-only", "publishFileswrite": "read-write",
		"publishHookUrl":  "Identity hook URL (optional)",
		"publishHookHint": "The engine POSTs {\"token\"} to this URL and expects {\"uid\"}; visitors open the link with ?token=...",
		"publishLinkUrl":  "Link", "publishRuns": "Runs", "publishTools": "Tool cards", "publishHook": "Identity hook",
		"publishToolsShown": "shown", "publishToolsHidden": "hidden", "publishNoHook": "none",
		"publishNoLinks": "This app has no share links.", "publishLinkCreated": "The link \"{name}\" was created.",
		"publishLinkRevoked":       "The link \"{name}\" was revoked.",
		"publishRevokeLinkConfirm": "Revoke the link \"{name}\"? Visitors lose access at once; their chats stay for you to read.",
		"publishCopyLink":          "Share link URL",
	},
	"zh": {
		"publishSettingsTab": "设置", "publishTab": "发布",
		"publishKeys":      "此应用的 API 密钥",
		"publishKeysHint":  "使用这些密钥的程序只能访问此应用,不能访问其他应用。",
		"publishKeyUsage":  "以 \"Authorization: Bearer <密钥>\" 发送到 /api/v1/chat/completions;它只能访问此应用。在 customUid 中填写您的终端用户。",
		"publishKeySecret": "新的 API 密钥", "publishExpiresOn": "过期日期(可选)", "publishKeyRate": "每分钟请求数(可选)",
		"publishExpires": "过期时间", "publishRate": "频率", "publishNoExpiry": "永不过期", "publishExpired": "已过期",
		"publishNoLimit": "不限", "publishPerMinute": "{n} 次/分钟", "publishNoKeys": "此应用还没有 API 密钥。",
		"publishKeyRevoked":       "密钥 \"{name}\" 已吊销。",
		"publishRevokeKeyConfirm": "吊销密钥 \"{name}\"?使用它的程序将无法再访问此应用。",
		"publishLinks":            "分享链接",
		"publishLinksHint":        "访客无需账户即可通过链接与此应用对话;每位访客只能看到自己的对话。",
		"publishNewLink":          "新建链接", "publishVisitorRate": "每位访客每分钟请求数", "publishMaxRuns": "总运行次数上限",
		"publishShowTools": "访客可以看到工具卡片", "publishFilesPanel": "文件面板",
		"publishFileshidden": "隐藏", "publishFilesread": "只读", "publishFileswrite": "读写",
		"publishHookUrl":  "身份验证钩子 URL(可选)",
		"publishHookHint": "引擎向此 URL POST {\"token\"},并期望返回 {\"uid\"};访客以 ?token=... 打开链接。",
		"publishLinkUrl":  "链接", "publishRuns": "运行次数", "publishTools": "工具卡片", "publishHook": "身份验证钩子",
		"publishToolsShown": "显示", "publishToolsHidden": "隐藏", "publishNoHook": "无",
		"publishNoLinks": "此应用还没有分享链接。", "publishLinkCreated": "已创建链接 \"{name}\"。",
		"publishLinkRevoked":       "链接 \"{name}\" 已吊销。",
		"publishRevokeLinkConfirm": "吊销链接 \"{name}\"?访客将立即失去访问权限;他们的对话仍会保留供您查看。",
		"publishCopyLink":          "分享链接 URL",
	},
}

// init adds the Publish tab's labels. A key defined twice, or in one
// language only, would show the wrong text or a bare key, so the engine
// refuses to start with it.
func init() {
	en, zh := publishLabels["en"], publishLabels["zh"]
	for k := range en {
		if _, ok := zh[k]; !ok {
			panic(fmt.Sprintf("web: label %q has no Chinese text", k))
		}
	}
	for k := range zh {
		if _, ok := en[k]; !ok {
			panic(fmt.Sprintf("web: label %q has no English text", k))
		}
	}
	for lang, m := range publishLabels {
		for k, v := range m {
			if _, ok := labels[lang][k]; ok {
				panic(fmt.Sprintf("web: label %q (%s) is defined twice", k, lang))
			}
			labels[lang][k] = v
		}
	}
}
