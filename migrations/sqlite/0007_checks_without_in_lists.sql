-- no-transaction
-- The same rules, written so that SQLite checks them with comparisons. A CHECK or a partial
-- index written as `x IN ('a', 'b', 'c')` makes SQLite build a temporary b-tree of the list
-- every time a statement that writes the row runs: measured, that was a tenth of the writer's
-- time. `x = 'a' OR x = 'b' OR x = 'c'` says the same and costs a few comparisons.
--
-- SQLite cannot change a CHECK in place: each table is built anew and its rows copied, with
-- foreign keys off for the copy (they are checked again at the end).

PRAGMA foreign_keys = OFF;

BEGIN;

-- Rebuilt below with its table; dropped first, so that no trigger names a table that is gone.
DROP TRIGGER follow_up_resumes;

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
);
INSERT INTO runs_new (id, function, conversation, initiator, input, mode, status, says, result, created_at,
                      updated_at, answerers)
    SELECT id, function, conversation, initiator, input, mode, status, says, result, created_at, updated_at,
           answerers FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_running ON runs (created_at) WHERE status = 'running';
CREATE INDEX runs_final ON runs (updated_at) WHERE status = 'finished' OR status = 'failed' OR status = 'cancelled';

CREATE TABLE questions_new (
    id            TEXT PRIMARY KEY NOT NULL,
    conversation  TEXT,
    run_id        TEXT NOT NULL REFERENCES runs (id),
    step          INTEGER NOT NULL,
    mode          TEXT NOT NULL CHECK (mode = 'follow_up' OR mode = 'blocking' OR mode = 'external'),
    kind          TEXT NOT NULL CHECK (kind = 'question' OR kind = 'confirm' OR kind = 'approval'),
    prompt        TEXT NOT NULL,
    detail        TEXT,
    options       TEXT NOT NULL,
    multi         INTEGER NOT NULL,
    allow_custom  INTEGER NOT NULL,
    default_json  TEXT,
    answerers     TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    status        TEXT NOT NULL CHECK (status = 'pending' OR status = 'answered' OR status = 'declined'
                                       OR status = 'expired' OR status = 'cancelled'),
    outcome       TEXT,
    answered_by   TEXT,
    answered_via  TEXT CHECK (answered_via = 'telegram' OR answered_via = 'discord' OR answered_via = 'console'
                              OR answered_via = 'webhook' OR answered_via = 'web' OR answered_via = 'api'
                              OR answered_via = 'gateway'),
    resolved_at   INTEGER,
    answered_name TEXT,
    UNIQUE (run_id, step),
    CHECK ((status = 'pending') = (outcome IS NULL))
);
INSERT INTO questions_new (id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom,
                           default_json, answerers, fingerprint, created_at, expires_at, status, outcome,
                           answered_by, answered_via, resolved_at, answered_name)
    SELECT id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom, default_json,
           answerers, fingerprint, created_at, expires_at, status, outcome, answered_by, answered_via, resolved_at,
           answered_name FROM questions;
DROP TABLE questions;
ALTER TABLE questions_new RENAME TO questions;
CREATE INDEX questions_pending_conversation ON questions (conversation) WHERE status = 'pending';
CREATE INDEX questions_pending_blocking ON questions (created_at) WHERE status = 'pending' AND mode = 'blocking';
CREATE INDEX questions_deadline ON questions (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX questions_pending ON questions (status) WHERE status = 'pending';
-- A follow-up run runs again the moment its pending question is resolved (see 0001).
CREATE TRIGGER follow_up_resumes AFTER UPDATE OF status ON questions
WHEN OLD.status = 'pending' AND NEW.status <> 'pending' AND NEW.mode = 'follow_up'
BEGIN
    UPDATE runs SET status = 'running', updated_at = NEW.resolved_at WHERE id = NEW.run_id AND status = 'waiting';
END;

CREATE TABLE deliveries_new (
    question_id TEXT NOT NULL REFERENCES questions (id),
    surface     TEXT NOT NULL,
    chat        TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    role        TEXT NOT NULL DEFAULT 'card' CHECK (role = 'card' OR role = 'prompt'),
    PRIMARY KEY (question_id, surface, chat, message)
);
INSERT INTO deliveries_new (question_id, surface, chat, message, created_at, role)
    SELECT question_id, surface, chat, message, created_at, role FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
CREATE INDEX deliveries_card ON deliveries (surface, chat, message);

PRAGMA foreign_key_check;

COMMIT;

PRAGMA foreign_keys = ON;
