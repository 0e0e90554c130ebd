// A skill and the skills page's answer as /admin/api/skills gives them.
export interface Skill {
  name: string;
  description: string;
  version: number;
  files: string[] | null;
  size: number;
  installedAt: string;
  installedBy?: string;
  location: string;
}

export interface SkillList {
  skills: Skill[] | null;
  invalid?: { dir: string; reason: string }[] | null;
  examples?: { name: string; description: string; installed: boolean }[] | null;
}

// SkillDetail is one skill with its instructions and versions.
export interface SkillDetail {
  skill: Skill;
  instructions: string;
  versions: { number: number; installedAt: string; installedBy?: string; size: number; current: boolean }[] | null;
}
