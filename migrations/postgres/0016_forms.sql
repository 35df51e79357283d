-- Forms: a question may be a form (`kind = 'form'`), and a form's fields, or those of several
-- questions asked together, are kept as JSON in `form`. What a person has filled in of a form
-- asked one field at a time is kept per person until the form is answered: `form_drafts`.
ALTER TABLE questions DROP CONSTRAINT questions_kind_check;
ALTER TABLE questions ADD CONSTRAINT questions_kind_check CHECK (kind IN ('question', 'confirm', 'approval', 'form'));
ALTER TABLE questions ADD COLUMN form TEXT;
CREATE TABLE form_drafts (
    question_id TEXT NOT NULL REFERENCES questions (id),
    person      TEXT NOT NULL,
    draft       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (question_id, person)
);
