-- askgate schema on PostgreSQL: the same tables and rules as the SQLite schema (migrations/sqlite,
-- as of its 0008). Times are unix milliseconds; flags are 0 or 1; JSON is stored as text, as
-- written, so that both backends read back the same bytes. Statuses are closed sets, as in the
-- Rust enums.

CREATE TABLE runs (
    id           TEXT PRIMARY KEY,
    function     TEXT NOT NULL,
    conversation TEXT,
    initiator    TEXT NOT NULL,
    input        TEXT NOT NULL,
    mode         TEXT NOT NULL CHECK (mode IN ('follow_up', 'blocking', 'external')),
    status       TEXT NOT NULL CHECK (status IN ('running', 'waiting', 'finished', 'failed', 'cancelled')),
    -- how many `say` messages earlier invocations delivered; replay does not send them again
    says         BIGINT NOT NULL DEFAULT 0,
    result       TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    -- who may answer its questions when it was started with a list (JSON); NULL: the channel's rule
    answerers    TEXT
);
CREATE INDEX runs_running ON runs (created_at) WHERE status = 'running';
CREATE INDEX runs_final ON runs (updated_at) WHERE status IN ('finished', 'failed', 'cancelled');
CREATE INDEX runs_external_waiting ON runs (id) WHERE status = 'waiting' AND mode = 'external';

-- A run's journal is its resolved questions ordered by step. `seq` orders questions as they were
-- asked (SQLite's rowid), for listing them page by page.
CREATE TABLE questions (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id            TEXT PRIMARY KEY,
    conversation  TEXT,
    run_id        TEXT NOT NULL REFERENCES runs (id),
    step          BIGINT NOT NULL,
    mode          TEXT NOT NULL CHECK (mode IN ('follow_up', 'blocking', 'external')),
    kind          TEXT NOT NULL CHECK (kind IN ('question', 'confirm', 'approval')),
    prompt        TEXT NOT NULL,
    detail        TEXT,
    options       TEXT NOT NULL,   -- JSON array of labels
    multi         BIGINT NOT NULL CHECK (multi IN (0, 1)),
    allow_custom  BIGINT NOT NULL CHECK (allow_custom IN (0, 1)),
    default_json  TEXT,
    answerers     TEXT NOT NULL,   -- JSON
    fingerprint   TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'declined', 'expired', 'cancelled')),
    outcome       TEXT,            -- JSON, set with the final status
    answered_by   TEXT,
    answered_via  TEXT,
    resolved_at   BIGINT,
    answered_name TEXT,
    UNIQUE (run_id, step),
    CHECK ((status = 'pending') = (outcome IS NULL))
);
CREATE INDEX questions_pending ON questions (seq) WHERE status = 'pending';
CREATE INDEX questions_pending_conversation ON questions (conversation, seq) WHERE status = 'pending';
CREATE INDEX questions_pending_blocking ON questions (created_at) WHERE status = 'pending' AND mode = 'blocking';
CREATE INDEX questions_deadline ON questions (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX questions_run ON questions (run_id);
-- a question found by the first characters of its id (`/answer 3f2a9c1b …`), in byte order
CREATE INDEX questions_id_prefix ON questions (id COLLATE "C");

-- A follow-up run runs again the moment its pending question is resolved: the claim and the
-- run's status change in one statement, so a crash between the claim and the replay leaves a
-- `running` run that the next start replays.
CREATE FUNCTION follow_up_resumes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs SET status = 'running', updated_at = NEW.resolved_at WHERE id = NEW.run_id AND status = 'waiting';
    RETURN NULL;
END;
$$;
CREATE TRIGGER follow_up_resumes AFTER UPDATE OF status ON questions
FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending' AND NEW.mode = 'follow_up')
EXECUTE FUNCTION follow_up_resumes();

-- Every rendered card, so that it can be retracted after any resolution: the card itself, or a
-- prompt that asked for the next message (Telegram's "Other…").
CREATE TABLE deliveries (
    question_id TEXT NOT NULL REFERENCES questions (id),
    surface     TEXT NOT NULL,
    chat        TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    role        TEXT NOT NULL DEFAULT 'card' CHECK (role IN ('card', 'prompt')),
    PRIMARY KEY (question_id, surface, chat, message)
);
-- a reply to a card is routed to its question
CREATE INDEX deliveries_card ON deliveries (surface, chat, message);

-- Allow-always decisions; scope is the conversation they were given in.
CREATE TABLE grants (
    id           TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    action       TEXT NOT NULL,
    granted_by   TEXT NOT NULL,
    question_id  TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);
CREATE INDEX grants_scope ON grants (conversation, action) WHERE revoked_at IS NULL;

-- Inbound updates already applied (a redelivered Telegram update or Discord interaction).
CREATE TABLE inbound (
    key        TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
CREATE INDEX inbound_created ON inbound (created_at);
