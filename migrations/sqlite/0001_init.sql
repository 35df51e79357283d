-- askgate schema. Times are unix milliseconds. Statuses are closed sets, as in the Rust enums.

CREATE TABLE runs (
    id           TEXT PRIMARY KEY NOT NULL,
    function     TEXT NOT NULL,
    conversation TEXT,
    initiator    TEXT NOT NULL,
    input        TEXT NOT NULL,
    mode         TEXT NOT NULL CHECK (mode IN ('follow_up', 'blocking', 'external')),
    status       TEXT NOT NULL CHECK (status IN ('running', 'waiting', 'finished', 'failed', 'cancelled')),
    -- how many `say` messages earlier invocations delivered; replay does not send them again
    says         INTEGER NOT NULL DEFAULT 0,
    result       TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
-- runs a stop interrupted mid-turn, found at start-up
CREATE INDEX runs_running ON runs (created_at) WHERE status = 'running';

-- A run's journal is its resolved questions ordered by step.
CREATE TABLE questions (
    id           TEXT PRIMARY KEY NOT NULL,
    conversation TEXT,
    run_id       TEXT NOT NULL REFERENCES runs (id),
    step         INTEGER NOT NULL,
    mode         TEXT NOT NULL CHECK (mode IN ('follow_up', 'blocking', 'external')),
    kind         TEXT NOT NULL CHECK (kind IN ('question', 'confirm', 'approval')),
    prompt       TEXT NOT NULL,
    detail       TEXT,
    options      TEXT NOT NULL,   -- JSON array of labels
    multi        INTEGER NOT NULL,
    allow_custom INTEGER NOT NULL,
    default_json TEXT,
    answerers    TEXT NOT NULL,   -- JSON
    fingerprint  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'declined', 'expired', 'cancelled')),
    outcome      TEXT,            -- JSON, set with the final status
    answered_by  TEXT,
    answered_via TEXT CHECK (answered_via IN ('telegram', 'discord', 'console', 'webhook', 'web', 'api', 'gateway')),
    resolved_at  INTEGER,
    UNIQUE (run_id, step),
    CHECK ((status = 'pending') = (outcome IS NULL))
);
CREATE INDEX questions_pending_conversation ON questions (conversation) WHERE status = 'pending';
CREATE INDEX questions_pending_blocking ON questions (created_at) WHERE status = 'pending' AND mode = 'blocking';
CREATE INDEX questions_deadline ON questions (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;

-- A follow-up run runs again the moment its pending question is resolved: the claim and the
-- run's status change in one statement, so a crash between the claim and the replay leaves a
-- `running` run that the next start replays.
CREATE TRIGGER follow_up_resumes AFTER UPDATE OF status ON questions
WHEN OLD.status = 'pending' AND NEW.status <> 'pending' AND NEW.mode = 'follow_up'
BEGIN
    UPDATE runs SET status = 'running', updated_at = NEW.resolved_at WHERE id = NEW.run_id AND status = 'waiting';
END;

-- Every rendered card, so that it can be retracted after any resolution.
CREATE TABLE deliveries (
    question_id TEXT NOT NULL REFERENCES questions (id),
    surface     TEXT NOT NULL,
    chat        TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (question_id, surface, chat, message)
);
-- a reply to a card is routed to its question
CREATE INDEX deliveries_card ON deliveries (surface, chat, message);

-- Allow-always decisions; scope is the conversation they were given in.
CREATE TABLE grants (
    id           TEXT PRIMARY KEY NOT NULL,
    conversation TEXT NOT NULL,
    action       TEXT NOT NULL,
    granted_by   TEXT NOT NULL,
    question_id  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX grants_scope ON grants (conversation, action) WHERE revoked_at IS NULL;

-- Inbound updates already applied (a redelivered Telegram update or Discord interaction).
CREATE TABLE inbound (
    key        TEXT PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL
);
