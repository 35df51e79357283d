-- People's own credentials: personal tokens, one-time sign-in links sent from a chat, and the
-- browser sessions those links became. Only the SHA-256 of each secret is kept.
CREATE TABLE logins (
    name       TEXT PRIMARY KEY NOT NULL,
    person     TEXT NOT NULL,
    digest     TEXT NOT NULL UNIQUE,
    may        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    link       INTEGER NOT NULL DEFAULT 0
);
