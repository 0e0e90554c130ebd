// Package account serves people with an account: signing in and out,
// passwords and set-password links, personal API keys, the admins' user
// management, apps and their publishing (app keys and share links).
package account
