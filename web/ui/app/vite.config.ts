import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The engine serves the built files under /ui/ (web/ui, embedded from
// dist/), so every asset URL starts there. public/.keep lands in dist/ as
// the committed placeholder is, so a build leaves the checkout clean.
export default defineConfig({
  base: "/ui/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // The chat page and the other pages (src/pages) are entries of their
    // own, so they never load the canvas.
    rollupOptions: { input: { index: "index.html", chat: "chat.html", pages: "pages.html" } },
    // The budget is the chat page's 300 KB gzipped (issue 31; 168 KB with
    // KaTeX); Vite's warning counts bytes before compression.
    chunkSizeWarningLimit: 700,
  },
  test: {
    environment: "jsdom",
    globals: true,
    // The unit tests run beside Go's on a machine whose cores they share
    // (scripts/test): a test that takes 1.6 s alone took 6.5 s there, past
    // Vitest's default of 5 s. A limit is a hang's bound, not a speed goal.
    testTimeout: 60_000,
  },
});
