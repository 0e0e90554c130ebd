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
    // The chat page is its own entry, so it never loads the canvas.
    rollupOptions: { input: { index: "index.html", chat: "chat.html" } },
  },
  test: {
    environment: "jsdom",
    globals: true,
  },
});
