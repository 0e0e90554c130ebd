package web

// Labels of the set-password links, the users page's invitations and
// deletions, and the account page's key expiry and rate.
func init() {
	more := map[string]map[string]string{
		"en": {
			"setPasswordTitle": "Choose your password", "setPassword": "Set password",
			"passwordRule": "8 to 72 bytes.", "linkWorksOnce": "This link works once, until",
			"passwordSet":   "Your password is set; any sessions you had have ended.",
			"linkExpired":   "This link has expired. Ask an admin for a new link.",
			"linkInvalid":   "This link does not work: it was used already, replaced by a newer one, or mistyped. Ask an admin for a new link.",
			"linkDisabled":  "This account is disabled. Ask an admin to enable it; the link works again until it expires.",
			"inviteInstead": "Invite link instead of a password", "resetByLink": "Reset by link",
			"inviteLink":      "Send {name} this link: it sets their password once, until {expires}. It is shown only now.",
			"resetLink":       "New link for {name}: it sets their password once, until {expires}, and replaces any earlier link; their current password works until it is used. It is shown only now.",
			"deleteUserTitle": "Delete {name}?",
			"deleteUserHint":  "Their sessions and API keys end, and their chats in every app are deleted with their sandboxes. The apps they own:",
			"transferAppsTo":  "Transfer their apps to", "deleteApps": "Delete their apps, chats and sandboxes", "cancel": "Cancel",
			"userDeleted":         "{name} was deleted.",
			"userDeletedTransfer": "{name} was deleted; their apps ({n}) now belong to {to}.",
			"userDeletedApps":     "{name} was deleted with their apps ({n}).",
			"keyExpiry":           "Valid through (optional)", "keyRate": "Requests a minute (optional)",
			"expires": "Expires", "rate": "Rate", "expired": "expired", "perMinute": "{n}/min", "noLimit": "no limit",
		},
		"zh": {
			"setPasswordTitle": "设置您的密码", "setPassword": "设置密码",
			"passwordRule": "8 到 72 字节。", "linkWorksOnce": "此链接只能使用一次,有效期至",
			"passwordSet":   "密码已设置;您之前的会话均已结束。",
			"linkExpired":   "此链接已过期。请向管理员索取新的链接。",
			"linkInvalid":   "此链接无效:它已被使用、已被新链接取代,或地址有误。请向管理员索取新的链接。",
			"linkDisabled":  "此账户已停用。请管理员重新启用;在过期前链接仍可使用。",
			"inviteInstead": "用一次性链接代替密码", "resetByLink": "通过链接重置",
			"inviteLink":      "请把此链接发给 {name}:它可设置一次密码,有效期至 {expires}。链接只显示这一次。",
			"resetLink":       "{name} 的新链接:可设置一次密码,有效期至 {expires},并取代之前的链接;在使用前其当前密码仍然有效。链接只显示这一次。",
			"deleteUserTitle": "删除 {name}?",
			"deleteUserHint":  "其会话和 API 密钥将失效,其在所有应用中的对话及沙盒将被删除。其拥有的应用:",
			"transferAppsTo":  "将其应用转给", "deleteApps": "删除其应用、对话和沙盒", "cancel": "取消",
			"userDeleted":         "已删除 {name}。",
			"userDeletedTransfer": "已删除 {name};其应用({n} 个)现归 {to} 所有。",
			"userDeletedApps":     "已删除 {name} 及其应用({n} 个)。",
			"keyExpiry":           "有效期至(可选)", "keyRate": "每分钟请求数(可选)",
			"expires": "过期时间", "rate": "速率", "expired": "已过期", "perMinute": "{n}/分钟", "noLimit": "不限",
		},
	}
	for lang, m := range more {
		for k, v := range m {
			labels[lang][k] = v
		}
	}
}
