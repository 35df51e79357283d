-- A prompt for a rejection's or a decline's reason is recorded as a `note`, a prompt for the
-- person's own answer or the edited action as a `prompt`: a reply to either is recognised by
-- the stored message it replies to, never by reading the bot's own words back. SQLite cannot
-- change a CHECK in place, so the table is built anew (nothing references it).
CREATE TABLE deliveries_new (
    question_id  TEXT NOT NULL REFERENCES questions (id),
    surface      TEXT NOT NULL,
    chat         TEXT NOT NULL,
    message      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    role         TEXT NOT NULL DEFAULT 'card' CHECK (role = 'card' OR role = 'prompt' OR role = 'note'),
    conversation TEXT,
    PRIMARY KEY (question_id, surface, chat, message)
);
INSERT INTO deliveries_new (question_id, surface, chat, message, created_at, role, conversation)
    SELECT question_id, surface, chat, message, created_at, role, conversation FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
CREATE INDEX deliveries_card ON deliveries (surface, chat, message);
