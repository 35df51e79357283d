-- no-transaction
-- Answers may come from a channel a Rust program attached itself (surface `other`), and from
-- surfaces added later: `answered_via` is no longer limited by a CHECK (askgate writes only
-- surfaces it knows, and reads each back through its own parser). The table is built anew,
-- as in 0007, because SQLite cannot drop a CHECK in place.
--
-- Agents' runs that wait get an index of their own: at start askgate looks for ones whose
-- question was resolved before a crash, and without it that look read every run.

PRAGMA foreign_keys = OFF;

BEGIN;

DROP TRIGGER follow_up_resumes;

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
    answered_via  TEXT,
    resolved_at   INTEGER,
    answered_name TEXT,
    UNIQUE (run_id, step),
    CHECK ((status = 'pending') = (outcome IS NULL))
);
INSERT INTO questions_new (rowid, id, conversation, run_id, step, mode, kind, prompt, detail, options, multi,
                           allow_custom, default_json, answerers, fingerprint, created_at, expires_at, status, outcome,
                           answered_by, answered_via, resolved_at, answered_name)
    SELECT rowid, id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom,
           default_json, answerers, fingerprint, created_at, expires_at, status, outcome, answered_by, answered_via,
           resolved_at, answered_name FROM questions;
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

CREATE INDEX runs_external_waiting ON runs (id) WHERE status = 'waiting' AND mode = 'external';

PRAGMA foreign_key_check;

COMMIT;

PRAGMA foreign_keys = ON;
