// What a running sandbox uses (L4), as the engine samples it: its CPU
// share of one core, memory, processes and disk; -1 is a value the
// provider cannot read.
import { useEffect, useState } from "react";
import { humanSize } from "../chat/files/api";

export interface Usage {
  sampledAt: string;
  cpuSeconds: number;
  cpuPercent: number;
  memoryBytes: number;
  memoryLimitBytes: number;
  processes: number;
  diskBytes: number;
  diskLimitBytes: number;
}

// usageEveryMs is how often a page that shows use reads it again.
export const usageEveryMs = 5000;

const of = (n: number, limit: number) => (n < 0 ? "–" : humanSize(n) + (limit > 0 ? " / " + humanSize(limit) : ""));

// shown writes each figure as a person reads it.
export function shown(u: Usage): { cpu: string; memory: string; processes: string; disk: string } {
  return {
    cpu: u.cpuPercent < 0 ? "–" : Math.round(u.cpuPercent) + "%",
    memory: of(u.memoryBytes, u.memoryLimitBytes),
    processes: u.processes < 0 ? "–" : String(u.processes),
    disk: of(u.diskBytes, u.diskLimitBytes),
  };
}

// usePolled calls read now and every usageEveryMs while the page is
// visible, and gives its latest answer (null before the first).
export function usePolled<T>(read: (() => Promise<T>) | null): T | null {
  const [got, setGot] = useState<T | null>(null);
  useEffect(() => {
    if (!read) {
      setGot(null);
      return;
    }
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      if (document.visibilityState !== "hidden") {
        try {
          const v = await read();
          if (live) setGot(v);
        } catch {
          // A missed reading shows the last one; the next may succeed.
        }
      }
      if (live) timer = setTimeout(tick, usageEveryMs);
    };
    tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [read]);
  return got;
}
