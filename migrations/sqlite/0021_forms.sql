-- no-transaction
-- Forms: a question may be a form (`kind = 'form'`), and a form's fields, or those of several
-- questions asked together, are kept as JSON in `form`. SQLite cannot change a CHECK in place,
-- so the table is built anew with its rows copied, as in 0007, with foreign keys off for the
-- copy (they are checked again at the end).
--
-- What a person has filled in of a form asked one field at a time is kept per person until
-- the form is answered: `form_drafts`.

PRAGMA foreign_keys = OFF;

BEGIN;

CREATE TABLE questions_new (
    id            TEXT PRIMARY KEY NOT NULL,
    conversation  TEXT,
    run_id        TEXT NOT NULL REFERENCES runs (id),
    step          INTEGER NOT NULL,
    mode          TEXT NOT NULL CHECK (mode = 'follow_up' OR mode = 'blocking' OR mode = 'external'),
    kind          TEXT NOT NULL CHECK (kind = 'question' OR kind = 'confirm' OR kind = 'approval' OR kind = 'form'),
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
    quorum        INTEGER NOT NULL DEFAULT 1 CHECK (quorum >= 1),
    approvals     TEXT,
    nudges        TEXT,
    nudge_at      INTEGER,
    escalated_to  TEXT,
    asked_by      TEXT NOT NULL DEFAULT '',
    descriptions  TEXT,
    form          TEXT,
    UNIQUE (run_id, step),
    CHECK ((status = 'pending') = (outcome IS NULL))
);
INSERT INTO questions_new (id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom,
                           default_json, answerers, fingerprint, created_at, expires_at, status, outcome,
                           answered_by, answered_via, resolved_at, answered_name, quorum, approvals, nudges,
                           nudge_at, escalated_to, asked_by, descriptions)
    SELECT id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom, default_json,
           answerers, fingerprint, created_at, expires_at, status, outcome, answered_by, answered_via, resolved_at,
           answered_name, quorum, approvals, nudges, nudge_at, escalated_to, asked_by, descriptions FROM questions;
DROP TABLE questions;
ALTER TABLE questions_new RENAME TO questions;
CREATE INDEX questions_pending_conversation ON questions (conversation) WHERE status = 'pending';
CREATE INDEX questions_pending_blocking ON questions (created_at) WHERE status = 'pending' AND mode = 'blocking';
CREATE INDEX questions_deadline ON questions (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX questions_pending ON questions (status) WHERE status = 'pending';
CREATE INDEX questions_nudge_at ON questions (nudge_at) WHERE status = 'pending' AND nudge_at IS NOT NULL;
CREATE INDEX questions_escalated_to ON questions (escalated_to) WHERE escalated_to IS NOT NULL;

CREATE TABLE form_drafts (
    question_id TEXT NOT NULL REFERENCES questions (id),
    person      TEXT NOT NULL,
    draft       TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (question_id, person)
);

PRAGMA foreign_key_check;

COMMIT;

PRAGMA foreign_keys = ON;
