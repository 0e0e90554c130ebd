// Package files serves a chat's files to its users: the sandbox file API
// (list, read, write, download, status) and the uploads a user gives the
// agent, with the checks every door that writes a chat's files shares
// (Storage: the data disk and the chat's quota).
package files
