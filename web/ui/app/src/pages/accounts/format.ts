// What the account pages compute rather than draw: the words and the
// call of a user's deletion.

// AppsChoice is what becomes of a deleted user's apps.
export type AppsChoice = "transfer" | "delete";

// deletePath is the API call that deletes user id, with their apps given
// to user to, or deleted.
export function deletePath(id: string, apps: AppsChoice, to: string): string {
  let query = "?apps=" + apps;
  if (apps === "transfer") query += "&to=" + encodeURIComponent(to);
  return "/admin/api/users/" + encodeURIComponent(id) + query;
}

// deletedLabel is the label that says what a deletion did with n apps.
export function deletedLabel(n: number, apps: AppsChoice): string {
  if (n === 0) return "userDeleted";
  return apps === "transfer" ? "userDeletedTransfer" : "userDeletedApps";
}
