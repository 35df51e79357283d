-- Small values a chat platform keeps across restarts, by key (namespaced by the platform:
-- `teams:conversation:<id>`, `whatsapp:window:+15551234567`), with when each was last written.
CREATE TABLE platform_notes (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
