// Package docs holds the repository's pages (the *.md files beside this
// one) and no code. Its tests keep them honest where a program can check:
// every feature ID a comment of the code cites, such as "(K4)", is listed
// in FEATURES.md, and FEATURES.md's links reach their pages and headings.
package docs
