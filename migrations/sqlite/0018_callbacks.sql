-- Callbacks: where an agent's question or run posts its outcome once known (the outbox).
-- A row is written before its run, so it has no reference to it; rows whose run never came
-- are pruned with old runs.
CREATE TABLE callbacks (
    id           TEXT PRIMARY KEY NOT NULL,
    run_id       TEXT NOT NULL,
    question_id  TEXT,
    url          TEXT NOT NULL,
    headers      TEXT NOT NULL,
    secret       TEXT,
    created_at   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER,
    leased_until INTEGER,
    delivered_at INTEGER,
    gave_up_at   INTEGER,
    last_error   TEXT
);
CREATE INDEX callbacks_open ON callbacks (run_id) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
