-- no-transaction
-- Runs are found by their id and cards by their question or their message, never by SQLite's
-- rowid: both tables are kept WITHOUT ROWID, so a row is stored once, in its primary key's tree,
-- instead of once in the table and again in the key's index. Questions keep their rowid: it is
-- the order they were asked in. The tables are built anew (SQLite cannot change this in place),
-- with the same columns, checks and indexes.

PRAGMA foreign_keys = OFF;

BEGIN;

CREATE TABLE runs_new (
    id           TEXT PRIMARY KEY NOT NULL,
    function     TEXT NOT NULL,
    conversation TEXT,
    initiator    TEXT NOT NULL,
    input        TEXT NOT NULL,
    mode         TEXT NOT NULL CHECK (mode = 'follow_up' OR mode = 'blocking' OR mode = 'external'),
    status       TEXT NOT NULL CHECK (status = 'running' OR status = 'waiting' OR status = 'finished'
                                      OR status = 'failed' OR status = 'cancelled'),
    says         INTEGER NOT NULL DEFAULT 0,
    result       TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    answerers    TEXT
) WITHOUT ROWID;
INSERT INTO runs_new (id, function, conversation, initiator, input, mode, status, says, result, created_at,
                      updated_at, answerers)
    SELECT id, function, conversation, initiator, input, mode, status, says, result, created_at, updated_at,
           answerers FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_running ON runs (created_at) WHERE status = 'running';
CREATE INDEX runs_final ON runs (updated_at) WHERE status = 'finished' OR status = 'failed' OR status = 'cancelled';

CREATE TABLE deliveries_new (
    question_id  TEXT NOT NULL REFERENCES questions (id),
    surface      TEXT NOT NULL,
    chat         TEXT NOT NULL,
    message      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    role         TEXT NOT NULL DEFAULT 'card' CHECK (role = 'card' OR role = 'prompt' OR role = 'note'),
    conversation TEXT,
    PRIMARY KEY (question_id, surface, chat, message)
) WITHOUT ROWID;
INSERT INTO deliveries_new (question_id, surface, chat, message, created_at, role, conversation)
    SELECT question_id, surface, chat, message, created_at, role, conversation FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
CREATE INDEX deliveries_card ON deliveries (surface, chat, message);

COMMIT;

PRAGMA foreign_keys = ON;
