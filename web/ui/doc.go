// Package ui draws the server-rendered pages (templates, static assets
// and the labels of each language, all embedded) for every audience: the
// app list and builder, the chat page, the account and admin pages. The
// JSON handlers the pages call live in the packages by audience.
package ui
