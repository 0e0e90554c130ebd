// Package ui serves the pages for every audience: the browser app's built
// pages (app/dist, embedded: the canvas, the chat page and the other pages
// of app/src/pages), each with what it shows as the page's JSON data, and
// the labels of each language. The JSON handlers the pages call live in
// the packages by audience.
package ui
