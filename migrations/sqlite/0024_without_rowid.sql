-- no-transaction
-- A card is found by its question or by its message, never by SQLite's rowid: `deliveries` is
-- kept WITHOUT ROWID, so a card is stored once, in its primary key's tree (which holds all of
-- its short columns), instead of once in the table and again in the key's index. `runs` keeps
-- its rowid: a run's input and result can be kilobytes, and a row without a rowid over about a
-- twentieth of a page spills to a whole overflow page. `questions` keeps it too: it is the
-- order questions were asked in. The table is built anew (SQLite cannot change this in place),
-- with the same columns, checks and indexes.

PRAGMA foreign_keys = OFF;

BEGIN;

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
