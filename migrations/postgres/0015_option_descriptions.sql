-- One line about each option of a question, by position: a JSON list of text, NULL when no
-- option has one.
ALTER TABLE questions ADD COLUMN descriptions TEXT;
