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
    created_at   BIGINT NOT NULL,
    attempts     BIGINT NOT NULL DEFAULT 0,
    next_at      BIGINT,
    leased_until BIGINT,
    delivered_at BIGINT,
    gave_up_at   BIGINT,
    last_error   TEXT
);
CREATE INDEX callbacks_open ON callbacks (run_id) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
