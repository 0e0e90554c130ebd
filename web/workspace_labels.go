package web

// Labels of the workspace: attaching files to a chat, uploading in the
// files panel, the admins' skills page and the builder's skill choice.
func init() {
	more := map[string]map[string]string{
		"en": {
			"attach": "Attach files", "attachHint": "or drop files on the chat", "attachedFiles": "Attached files",
			"dropFiles": "Drop the files to attach them", "removeFile": "Remove {name}", "dismiss": "Dismiss",
			"uploading": "Uploading {name}", "uploadFailed": "{name} was not uploaded: {reason}",
			"uploadNetwork": "the connection was lost; check it and try again",
			"waitUploads":   "Wait until the files are uploaded, or remove them, then send.",
			"uploadHere":    "Upload here", "uploadTo": "Files go to {dir}",
			"skills":       "Skills",
			"skillsHint":   "A skill is a folder with a SKILL.md and its scripts. Every sandbox sees the installed skills read-only under /workspace/skills; each app chooses the ones its agent may use.",
			"skillInstall": "Install or replace a skill", "skillZip": "Skill archive (.zip)", "skillInstallButton": "Install",
			"skillZipHint":     "A ZIP of the skill's folder. A skill of the same name is replaced as a new version; chats running its scripts keep the files they opened.",
			"skillChooseZip":   "Choose the skill's ZIP file first.",
			"skillInstalled":   "{name} version {version} is installed.",
			"skillInstalling":  "Installing {name}…",
			"skillDescription": "Description", "skillVersion": "Version", "skillFiles": "Files", "skillSize": "Size",
			"skillInstalledAt": "Installed", "skillInstalledBy": "By", "skillView": "View", "skillLocation": "In the sandbox",
			"skillDeleteConfirm": "Delete the skill \"{name}\"? The apps that chose it can no longer use it.",
			"skillDeleted":       "The skill \"{name}\" was deleted.", "skillNone": "No skills are installed.",
			"skillInvalid":     "Invalid skills",
			"skillInvalidHint": "Folders in the skills directory that are not valid skills; agents cannot use them. Install a corrected ZIP of the same name, or remove the folder.",
			"skillDir":         "Folder", "skillReason": "Why it is invalid", "skillNoInvalid": "Every folder is a valid skill.",
			"skillInstructions": "Instructions (SKILL.md)", "skillVersions": "Versions", "skillCurrent": "current", "close": "Close",
			"skillsNoneInstalled": "No skills are installed; an admin installs them on the Skills page.",
			"skillsLoadFailed":    "The installed skills could not be listed ({reason}); saving keeps this app's skills as they are.",
			"skillNotInstalled":   "not installed",
		},
		"zh": {
			"attach": "添加文件", "attachHint": "或把文件拖到对话中", "attachedFiles": "附件",
			"dropFiles": "松开以添加文件", "removeFile": "移除 {name}", "dismiss": "关闭",
			"uploading": "正在上传 {name}", "uploadFailed": "{name} 未上传:{reason}",
			"uploadNetwork": "连接中断;请检查网络后重试",
			"waitUploads":   "请等文件上传完成(或移除它们)后再发送。",
			"uploadHere":    "上传到此处", "uploadTo": "文件将上传到 {dir}",
			"skills":       "技能",
			"skillsHint":   "技能是一个包含 SKILL.md 及其脚本的文件夹。每个沙盒都能以只读方式在 /workspace/skills 下看到已安装的技能;每个应用选择其 Agent 可用的技能。",
			"skillInstall": "安装或替换技能", "skillZip": "技能压缩包(.zip)", "skillInstallButton": "安装",
			"skillZipHint":     "技能文件夹的 ZIP。同名技能会被替换为新版本;正在运行其脚本的对话仍使用已打开的文件。",
			"skillChooseZip":   "请先选择技能的 ZIP 文件。",
			"skillInstalled":   "已安装 {name} 第 {version} 版。",
			"skillInstalling":  "正在安装 {name}…",
			"skillDescription": "描述", "skillVersion": "版本", "skillFiles": "文件数", "skillSize": "大小",
			"skillInstalledAt": "安装时间", "skillInstalledBy": "安装者", "skillView": "查看", "skillLocation": "沙盒中的位置",
			"skillDeleteConfirm": "删除技能 \"{name}\"?选择了它的应用将无法再使用它。",
			"skillDeleted":       "技能 \"{name}\" 已删除。", "skillNone": "尚未安装任何技能。",
			"skillInvalid":     "无效的技能",
			"skillInvalidHint": "技能目录中不是有效技能的文件夹;Agent 无法使用它们。请安装同名的修正版 ZIP,或删除该文件夹。",
			"skillDir":         "文件夹", "skillReason": "无效原因", "skillNoInvalid": "所有文件夹都是有效的技能。",
			"skillInstructions": "说明(SKILL.md)", "skillVersions": "版本", "skillCurrent": "当前", "close": "关闭",
			"skillsNoneInstalled": "尚未安装任何技能;管理员可在“技能”页面安装。",
			"skillsLoadFailed":    "无法列出已安装的技能({reason});保存时将保留此应用当前的技能。",
			"skillNotInstalled":   "未安装",
		},
	}
	for lang, m := range more {
		for k, v := range m {
			labels[lang][k] = v
		}
	}
}
