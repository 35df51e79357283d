-- A grant may be a rule: its action is a pattern where `*` matches any run of characters.
ALTER TABLE grants ADD COLUMN pattern INTEGER NOT NULL DEFAULT 0 CHECK (pattern IN (0, 1));
