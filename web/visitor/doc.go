// Package visitor serves share links' visitors: the gate that opens a
// link (its expiry, its identity hook, the visitor's cookie session) and
// the visitor's pages. The API under /share/:linkId/api is the signed-in
// users' handlers, with the visitor as the caller.
package visitor
