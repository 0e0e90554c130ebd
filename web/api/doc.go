// Package api holds what every handler of the engine's HTTP API shares:
// who the caller is (the authentication middleware and the auth.Principal
// a request carries, CSRF, rate limits), the access rules on apps and
// chats, the one table from domain errors to HTTP statuses and error
// kinds, and JSON bodies. The handlers live in packages by audience
// beside it (chat, files, sandboxapi, admin, account, visitor, ui); it
// must never import them.
package api
