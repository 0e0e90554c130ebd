// How the cards that ask the person something send the answer: as the
// next chat request, which the page runs as a new turn whose own message
// is said. It resolves false when the engine refused the request, so the
// card can be answered again.
export type SendAnswer = (said: string, request: Record<string, unknown>) => Promise<boolean>;

// expiredAt says whether a question's expiry (an ISO time, or none) has
// passed.
export const expiredAt = (expiresAt: string | undefined, now = Date.now()) => !!expiresAt && new Date(expiresAt).getTime() < now;
